"""Errors raised by Moldau's client: a `KafkaException` carrying the Kafka error code.

Mirrors confluent-kafka's `KafkaException`: `exc.code` is kio's `ErrorCode`, `exc.retriable` says
whether retrying the same request may succeed. Failures without a wire error code (no broker
reachable, a request that timed out) use the closest Kafka code: NETWORK_EXCEPTION and
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ConfigException",
    "ErrorCode",
    "KafkaException",
    "check_error",
]

# Error codes that Kafka marks as retriable (RetriableException subclasses).
_RETRIABLE = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.request_timed_out,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.kafka_storage_error,
        ErrorCode.fetch_session_id_not_found,
        ErrorCode.invalid_fetch_session_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.offset_not_available,
        ErrorCode.preferred_leader_not_available,
        ErrorCode.eligible_leaders_not_available,
        ErrorCode.election_not_needed,
        ErrorCode.unstable_offset_commit,
        ErrorCode.throttling_quota_exceeded,
        ErrorCode.concurrent_transactions,
        ErrorCode.rebalance_in_progress,
    }
)


class KafkaException(KafkaError):
    """A request failed with a Kafka error code (`code`), optionally with the broker's message.
    `fatal` (as confluent-kafka's `KafkaError.fatal()`): the client object can only be closed."""

    fatal = False

    @property
    def retriable(self) -> bool:
        return self.code in _RETRIABLE

    @property
    def name(self) -> str:
        return self.code.name.upper()

    def __str__(self) -> str:
        if self.message and self.message != self.code.name:
            return f"{self.name}: {self.message}"
        return self.name


class ConfigException(ValueError):
    """A client setting is unknown or has a value of the wrong shape."""


def error_code_of(value: Any) -> ErrorCode:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


def check_error(code: Any, message: str | None = None, *, context: str = "") -> None:
    """Raise `KafkaException` unless `code` is NONE; `context` names what the code was about."""
    error = error_code_of(code)
    if error is ErrorCode.none:
        return
    parts = [part for part in (context, message) if part]
    raise KafkaException(error, ": ".join(parts) if parts else None)
