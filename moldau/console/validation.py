"""Every value a user types into the console, checked before any of it reaches the cluster.

Each function takes the raw form or query text and returns the typed value, or raises
`InvalidInput` naming the field and saying what is wrong and what is expected. The rules are
Kafka's where Kafka has one (topic names as `org.apache.kafka.common.internals.Topic` checks them,
topic config values through the same definitions the broker parses them with); elsewhere they
are the console's own bounds (how many partitions it creates, how large a test message is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from moldau.config.definitions import TOPIC_KEYS
from moldau.config.values import ConfigError, parse_value

__all__ = [
    "MAX_BROWSE_LIMIT",
    "MAX_HEADERS",
    "MAX_KEY_BYTES",
    "MAX_PARTITIONS",
    "MAX_VALUE_BYTES",
    "InvalidInput",
    "OffsetTarget",
    "browse_limit",
    "group_id",
    "headers",
    "offset",
    "optional_partition",
    "partition",
    "partition_count",
    "replication_factor",
    "text_field",
    "timestamp_ms",
    "topic_config",
    "topic_configs",
    "topic_name",
]

MAX_TOPIC_NAME: Final = 249  # Kafka's limit (the log dir name adds a partition suffix)
MAX_PARTITIONS: Final = 10_000  # per create or add; Kafka has no lower cap, a console should
MAX_REPLICATION_FACTOR: Final = 32_767  # an INT16 on the wire
MAX_GROUP_ID: Final = 1_000
MAX_BROWSE_LIMIT: Final = 500
MAX_KEY_BYTES: Final = 64 * 1024
MAX_VALUE_BYTES: Final = 1024 * 1024
MAX_HEADERS: Final = 64
MAX_CONFIGS: Final = 100
MAX_OFFSET: Final = 2**63 - 1
# The earliest and latest instants a timestamp may name: 1970 to the year 9999.
MAX_TIMESTAMP_MS: Final = 253_402_300_799_999

_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
# C0 controls other than tab, line feed and carriage return, DEL, and the C1 controls.
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


class InvalidInput(ValueError):
    """A value the console refuses: `field` names the form field, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class OffsetTarget:
    """Where a group's offsets go (`reset`): `earliest`, `latest`, an `offset` or a `timestamp`
    (then `value` is the offset or the time in ms)."""

    kind: str
    value: int | None = None


def text_field(raw: str | None, *, field: str, max_length: int, required: bool = True) -> str:
    """Free text of at most `max_length` characters without control characters."""
    text = (raw or "").strip()
    if not text:
        if required:
            raise InvalidInput(field, f"{field} is required")
        return ""
    if len(text) > max_length:
        raise InvalidInput(field, f"{field} is longer than {max_length} characters")
    if _CONTROL.search(text) or "\n" in text or "\r" in text:
        raise InvalidInput(field, f"{field} contains control characters")
    return text


def topic_name(raw: str | None) -> str:
    """A legal Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -, neither `.` nor `..`."""
    name = (raw or "").strip()
    if not name:
        raise InvalidInput("topic", "a topic name is required")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidInput("topic", f"a topic name has at most {MAX_TOPIC_NAME} characters")
    if name in (".", ".."):
        raise InvalidInput("topic", "a topic cannot be named '.' or '..'")
    if not _TOPIC_NAME.fullmatch(name):
        raise InvalidInput(
            "topic", "a topic name uses only letters, digits, '.', '_' and '-' (no spaces)"
        )
    return name


def group_id(raw: str | None) -> str:
    """A consumer group id: any text Kafka accepts, without control characters."""
    return text_field(raw, field="group", max_length=MAX_GROUP_ID)


def _integer(raw: str | None, *, field: str, minimum: int, maximum: int) -> int:
    text = (raw or "").strip()
    if not text:
        raise InvalidInput(field, f"{field} is required")
    if not re.fullmatch(r"[+-]?[0-9]{1,20}", text):
        raise InvalidInput(field, f"{field} must be a whole number, not {_shown(text)}")
    value = int(text)
    if not minimum <= value <= maximum:
        raise InvalidInput(field, f"{field} must be between {minimum} and {maximum}")
    return value


def partition_count(raw: str | None) -> int:
    return _integer(raw, field="partitions", minimum=1, maximum=MAX_PARTITIONS)


def replication_factor(raw: str | None) -> int:
    return _integer(raw, field="replication factor", minimum=1, maximum=MAX_REPLICATION_FACTOR)


def partition(raw: str | None, *, count: int | None = None) -> int:
    """A partition number; with `count`, one the topic has."""
    maximum = MAX_PARTITIONS * 100 if count is None else count - 1
    if count is not None and count <= 0:
        raise InvalidInput("partition", "the topic has no partitions")
    return _integer(raw, field="partition", minimum=0, maximum=maximum)


def optional_partition(raw: str | None, *, count: int | None = None) -> int | None:
    """A partition number, or None for blank (the producer's partitioner, or every partition)."""
    if raw is None or not raw.strip() or raw.strip().lower() in ("any", "all"):
        return None
    return partition(raw, count=count)


def offset(raw: str | None, *, field: str = "offset") -> int:
    return _integer(raw, field=field, minimum=0, maximum=MAX_OFFSET)


def browse_limit(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return 50
    return _integer(raw, field="limit", minimum=1, maximum=MAX_BROWSE_LIMIT)


def timestamp_ms(raw: str | None) -> int:
    """An instant as milliseconds since the epoch, or as ISO 8601 (`2025-01-31T12:00:00`,
    with a zone or in UTC; a date alone is its midnight UTC)."""
    text = (raw or "").strip()
    if not text:
        raise InvalidInput("timestamp", "a timestamp is required")
    if re.fullmatch(r"[0-9]{1,16}", text):
        value = int(text)
    else:
        if len(text) > 40:
            raise InvalidInput("timestamp", "a timestamp has at most 40 characters")
        try:
            moment = datetime.fromisoformat(text.replace(" ", "T", 1))
        except ValueError:
            raise InvalidInput(
                "timestamp",
                f"{_shown(text)} is not a time: give milliseconds since the epoch or ISO 8601 "
                "(2025-01-31T12:00:00Z)",
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = int(moment.timestamp() * 1000)
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise InvalidInput("timestamp", "a timestamp must lie between 1970 and the year 9999")
    return value


def topic_config(name: str, value: str) -> tuple[str, str]:
    """One topic config: a name Kafka defines and a value of its type and range."""
    name = name.strip()
    key = TOPIC_KEYS.get(name)
    if key is None:
        raise InvalidInput("configs", f"{_shown(name)} is not a topic config")
    value = value.strip()
    if len(value) > 10_000 or _CONTROL.search(value):
        raise InvalidInput("configs", f"the value of {name} is too long or has control characters")
    try:
        parse_value(key, value)
    except ConfigError as error:
        raise InvalidInput("configs", str(error)) from None
    return name, value


def topic_configs(raw: str | None) -> dict[str, str]:
    """Topic configs written one `name=value` a line (blank lines and `#` comments skipped)."""
    configs: dict[str, str] = {}
    for line in (raw or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, separator, value = line.partition("=")
        if not separator:
            raise InvalidInput("configs", f"{_shown(line.strip())} is not name=value")
        name, value = topic_config(name, value)
        if name in configs:
            raise InvalidInput("configs", f"{name} is given twice")
        configs[name] = value
        if len(configs) > MAX_CONFIGS:
            raise InvalidInput("configs", f"at most {MAX_CONFIGS} configs at once")
    return configs


def headers(raw: str | None) -> list[tuple[str, bytes]]:
    """Record headers written one `name=value` a line; the value is sent as UTF-8."""
    result: list[tuple[str, bytes]] = []
    for line in (raw or "").splitlines():
        if not line.strip():
            continue
        name, separator, value = line.partition("=")
        name = name.strip()
        if not separator or not name:
            raise InvalidInput("headers", f"{_shown(line.strip())} is not name=value")
        if len(name) > 1_000 or _CONTROL.search(name):
            raise InvalidInput("headers", "a header name is too long or has control characters")
        result.append((name, value.encode()))
        if len(result) > MAX_HEADERS:
            raise InvalidInput("headers", f"at most {MAX_HEADERS} headers")
    return result


def _shown(text: str) -> str:
    """A refused value quoted for the message, shortened."""
    return repr(text if len(text) <= 40 else text[:37] + "...")
