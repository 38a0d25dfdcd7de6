"""`Message`: one consumed record, with confluent-kafka's accessor methods.

`msg.topic()`, `partition()`, `offset()`, `key()`, `value()`, `headers()`, `timestamp()` (a
`(timestamp_type, milliseconds)` pair), `leader_epoch()` and `error()` (None for records).
"""

from __future__ import annotations

from typing import Final

from moldau.client.errors import KafkaException

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "Message",
]

TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2


class Message:
    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_leader_epoch",
        "_offset",
        "_partition",
        "_timestamp",
        "_timestamp_type",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
        timestamp: int = -1,
        timestamp_type: int = TIMESTAMP_CREATE_TIME,
        leader_epoch: int = -1,
        error: KafkaException | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._timestamp_type = timestamp_type
        self._leader_epoch = leader_epoch
        self._error = error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]]:
        return list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp_type, self._timestamp

    def leader_epoch(self) -> int:
        return self._leader_epoch

    def error(self) -> KafkaException | None:
        return self._error

    def __len__(self) -> int:
        return len(self._value or b"")

    def __repr__(self) -> str:
        return (
            f"Message(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
            f"key={self._key!r}, value={self._value!r})"
        )
