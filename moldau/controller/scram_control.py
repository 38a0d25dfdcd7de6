"""Users' SCRAM credentials in the metadata, as Kafka's ScramControlManager (KIP-554).

`alter_user_scram_credentials` validates a request as Kafka does and returns the
UserScramCredentialRecord / RemoveUserScramCredentialRecord of its changes: a user may appear
once per request (twice, across deletions and upsertions, is DUPLICATE_RESOURCE for that user),
the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, iterations between 4096 and 16384, and a
deletion must name a credential that exists. The client salts the password; the controller
keeps the stored and server keys derived from it (never the salted password).
`describe_user_scram_credentials` reads them back from the image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moldau.controller.operations import (
    ScramCredentialDeletion,
    ScramCredentialResult,
    ScramCredentialUpsertion,
)
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    credential_from_salted_password,
)

DUPLICATE = "A user credential cannot be altered twice in the same request"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
NOT_FOUND_FOR_DELETION = "Attempt to delete a user credential that does not exist"
DESCRIBE_DUPLICATE = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
DESCRIBE_NOT_FOUND = "Attempt to describe a user credential that does not exist: "


def alter_user_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[ScramCredentialDeletion],
    upsertions: Sequence[ScramCredentialUpsertion],
) -> tuple[list[MetadataRecord], list[ScramCredentialResult]]:
    changes: list[ScramCredentialDeletion | ScramCredentialUpsertion] = [*deletions, *upsertions]
    seen: dict[str, int] = {}
    for change in changes:
        seen[change.name] = seen.get(change.name, 0) + 1
    records: list[MetadataRecord] = []
    results: list[ScramCredentialResult] = []
    for change in changes:
        if seen[change.name] > 1:
            continue
        try:
            if isinstance(change, ScramCredentialDeletion):
                records.append(_deletion(image, change))
            else:
                records.append(_upsertion(change))
        except KafkaError as error:
            results.append(
                ScramCredentialResult(
                    user=change.name, error_code=error.code, error_message=error.message
                )
            )
            continue
        results.append(ScramCredentialResult(user=change.name))
    for name, count in seen.items():
        if count > 1:
            results.append(
                ScramCredentialResult(
                    user=name, error_code=ErrorCode.duplicate_resource, error_message=DUPLICATE
                )
            )
    return records, results


def _mechanism(number: int) -> str:
    name = MECHANISM_NAMES.get(number)
    if name is None:
        raise KafkaError(ErrorCode.unsupported_sasl_mechanism, UNKNOWN_MECHANISM)
    return name


def _deletion(image: MetadataImage, deletion: ScramCredentialDeletion) -> MetadataRecord:
    mechanism = _mechanism(deletion.mechanism)
    if (deletion.name, mechanism) not in image.scram_credentials:
        raise KafkaError(ErrorCode.resource_not_found, NOT_FOUND_FOR_DELETION)
    return RemoveUserScramCredentialRecord(name=deletion.name, mechanism=mechanism)


def _upsertion(upsertion: ScramCredentialUpsertion) -> MetadataRecord:
    mechanism = _mechanism(upsertion.mechanism)
    if not upsertion.name:
        raise KafkaError(ErrorCode.unacceptable_credential, "Username must not be empty")
    if upsertion.iterations < MIN_ITERATIONS:
        raise KafkaError(ErrorCode.unacceptable_credential, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        raise KafkaError(ErrorCode.unacceptable_credential, "Too many iterations")
    if not upsertion.salt or not upsertion.salted_password:
        raise KafkaError(
            ErrorCode.unacceptable_credential, "The salt and the salted password must be given"
        )
    credential = credential_from_salted_password(
        mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
    )
    return UserScramCredentialRecord.of(upsertion.name, mechanism, credential)


def describe_user_scram_credentials(
    image: MetadataImage, users: Sequence[str] | None
) -> list[dict[str, Any]]:
    """Kafka's DescribeUserScramCredentials results: every user with credentials when `users`
    is None or empty; otherwise each named user, RESOURCE_NOT_FOUND when it has none and
    DUPLICATE_RESOURCE (once) when named twice."""
    by_user: dict[str, list[dict[str, int]]] = {}
    for (name, mechanism), credential in sorted(image.scram_credentials.items()):
        by_user.setdefault(name, []).append(
            {"mechanism": MECHANISM_TYPES[mechanism], "iterations": credential.iterations}
        )
    if not users:
        return [_found(name, infos) for name, infos in by_user.items()]
    counts: dict[str, int] = {}
    for name in users:
        counts[name] = counts.get(name, 0) + 1
    results = []
    for name, count in counts.items():
        if count > 1:
            results.append(_error(name, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE + name))
        elif name not in by_user:
            results.append(_error(name, ErrorCode.resource_not_found, DESCRIBE_NOT_FOUND + name))
        else:
            results.append(_found(name, by_user[name]))
    return results


def _found(name: str, infos: list[dict[str, int]]) -> dict[str, Any]:
    return {
        "user": name,
        "error_code": ErrorCode.none,
        "error_message": None,
        "credential_infos": infos,
    }


def _error(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}
