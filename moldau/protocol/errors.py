"""Kafka error codes and the exception the cores raise with them.

The codes are kio's `ErrorCode` (generated from Kafka's own list). Cores raise
`KafkaError(ErrorCode.x, "why")`; handlers map it to the per-partition error code in one place.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """A failure that has a Kafka error code, raised by the cores and answered on the wire."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"
