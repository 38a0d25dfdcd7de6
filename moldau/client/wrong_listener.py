"""What a client pointed at the wrong kind of listener is told, instead of a bare refusal or a
closed connection: a controller listener (which serves the metadata quorum, not clients) names
the brokers' listeners when it knows them (a SASL listener reached without SASL settings names its
mechanisms: `BrokerConnection`'s own question). Both are asked only once something has already
failed.
"""

from __future__ import annotations

import contextlib

from moldau.client.connection import BrokerConnection
from moldau.client.errors import ErrorCode, KafkaException
from moldau.protocol.api_keys import ApiKey

__all__ = ["bootstrap_failure", "controller_listener_error"]

# A listener that answered and refused: more to the point than those that did not answer.
_REFUSALS = frozenset(
    {
        ErrorCode.sasl_authentication_failed,
        ErrorCode.unsupported_sasl_mechanism,
        ErrorCode.illegal_sasl_state,
        ErrorCode.mismatched_endpoint_type,
    }
)


def serves_controllers_only(connection: BrokerConnection) -> bool:
    """A controller listener: Raft's Vote, no Metadata (what its ApiVersions answer lists)."""
    ranges = connection.versions.ranges
    return ApiKey.METADATA not in ranges and ApiKey.VOTE in ranges


async def controller_listener_error(connection: BrokerConnection) -> KafkaException | None:
    """MISMATCHED_ENDPOINT_TYPE naming the brokers' endpoints the controller knows of, when
    `connection` reached a controller listener; None for a broker listener."""
    if not serves_controllers_only(connection):
        return None
    brokers: list[str] = []
    if connection.versions.ranges.get(ApiKey.DESCRIBE_CLUSTER, (0, 0))[1] >= 1:
        with contextlib.suppress(KafkaException):
            answer = await connection.request(
                ApiKey.DESCRIBE_CLUSTER,
                {"include_cluster_authorized_operations": False, "endpoint_type": 1},
            )
            brokers = [f"{broker.host}:{broker.port}" for broker in answer.brokers]
    where = f"; the brokers listen on {','.join(brokers)}" if brokers else ""
    return KafkaException(
        ErrorCode.mismatched_endpoint_type,
        f"{connection.address} is a controller listener, which serves the metadata quorum, "
        f"not clients{where}",
    )


def bootstrap_failure(failures: list[KafkaException]) -> KafkaException:
    """Why no bootstrap server could be used: a listener that refused (a failed login, a
    controller listener) by its own error, else NETWORK_EXCEPTION with every reason."""
    for failure in failures:
        if failure.code in _REFUSALS:
            return failure
    reasons = ", ".join(failure.message or str(failure) for failure in failures)
    return KafkaException(ErrorCode.network_exception, f"no broker reachable: {reasons}")
