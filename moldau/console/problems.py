"""What the page says when something fails, and with which HTTP status: a value the console
refused (400), the cluster's refusal (what it said, with the error's name), an ACL that refuses
the console's principal (403, said as such), a failed login, an unreachable cluster (503).
Never a stack trace: anything else is "an unexpected error" and goes to the console's log.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from moldau.client.errors import ConfigException, ErrorCode, KafkaException
from moldau.console.validation import InvalidInput

__all__ = ["Problem", "ProblemKind", "problem_of"]


class ProblemKind(enum.StrEnum):
    input = "input"
    not_authorized = "not-authorized"
    not_authenticated = "not-authenticated"
    unreachable = "unreachable"
    refused = "refused"
    unexpected = "unexpected"


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    title: str
    message: str
    status: int
    field: str | None = None


_NOT_AUTHORIZED: Final = frozenset(
    {
        ErrorCode.topic_authorization_failed,
        ErrorCode.group_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.delegation_token_authorization_failed,
    }
)
_NOT_AUTHENTICATED: Final = frozenset(
    {
        ErrorCode.sasl_authentication_failed,
        ErrorCode.unsupported_sasl_mechanism,
        ErrorCode.illegal_sasl_state,
    }
)
_UNREACHABLE: Final = frozenset({ErrorCode.network_exception, ErrorCode.request_timed_out})
_STATUS: Final = {
    ErrorCode.unknown_topic_or_partition: 404,
    ErrorCode.group_id_not_found: 404,
    ErrorCode.topic_already_exists: 409,
    ErrorCode.non_empty_group: 409,
}


def problem_of(error: BaseException) -> Problem:
    if isinstance(error, InvalidInput):
        return Problem(ProblemKind.input, "Invalid input", error.message, 400, error.field)
    if isinstance(error, ConfigException):
        return Problem(ProblemKind.input, "Invalid client setting", str(error), 400)
    if isinstance(error, TimeoutError):
        return Problem(
            ProblemKind.unreachable,
            "No answer in time",
            "the cluster did not answer in time; try again",
            503,
        )
    if not isinstance(error, KafkaException):
        return Problem(
            ProblemKind.unexpected,
            "Unexpected error",
            "the console hit an unexpected error; its log has the details",
            500,
        )
    said = str(error)
    if error.code in _NOT_AUTHORIZED:
        return Problem(
            ProblemKind.not_authorized,
            "Not authorized",
            f"the cluster's ACLs do not allow the console's principal this: {said}",
            403,
        )
    if error.code in _NOT_AUTHENTICATED:
        return Problem(
            ProblemKind.not_authenticated,
            "Authentication failed",
            f"the cluster refused the console's login: {said}; check the SASL settings given "
            "with -X or --command-config",
            503,
        )
    if error.code in _UNREACHABLE:
        return Problem(
            ProblemKind.unreachable,
            "Cluster unreachable",
            f"{said}; is the cluster running, and is the console's -b address right?",
            503,
        )
    return Problem(
        ProblemKind.refused, "Refused by the cluster", said, _STATUS.get(error.code, 400)
    )
