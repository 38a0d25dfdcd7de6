"""Options of `format("moldau")`, spelled and defaulted as Spark's built-in Kafka source and sink.

`SourceOptions.parse(options, streaming=...)` and `SinkOptions.parse(options)` validate a Spark
options map (case-insensitive keys) and raise `ValueError` naming the option. `kafka.*` options go
to Moldau's client with the prefix removed; the keys Spark's Kafka connector rejects are rejected
here with Spark's reasons, and Java-only consumer settings the client does not know are dropped
(security settings it does not know are refused). Security options take the Java client's names
(`kafka.security.protocol`, `kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from moldau.client.config import DEFAULTS as CLIENT_SETTINGS
from moldau.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    parse_partition_json,
)
from moldau.spark.registry_options import RegistryOptions, parse_registry_options

__all__ = ["SinkOptions", "SourceOptions", "client_settings", "source_registry_options"]

# Keys Spark's Kafka source refuses, with what to use instead.
_SOURCE_REJECTED: Final[Mapping[str, str]] = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast or decode the 'key' column",
    "value.deserializer": "values are always read as bytes; cast or decode the 'value' column",
    "enable.auto.commit": "offsets live in Spark's checkpoint (see 'commitOffsetsToGroup')",
    "interceptor.classes": "interceptors are not supported",
}
_SINK_REJECTED: Final[Mapping[str, str]] = {
    "key.serializer": "keys are written as bytes; cast the 'key' column to string or binary",
    "value.serializer": "values are written as bytes; cast the 'value' column to string or binary",
}
# A Java-only consumer setting the client does not know is dropped, unless it is about security.
_SECURITY_PREFIXES: Final = ("ssl.", "sasl.", "security.")
# Settings the connector decides itself; a kafka.* option may not override them.
_CONNECTOR_OWNED: Final = frozenset({"bootstrap.servers", "group.id", "transactional.id"})

DEFAULT_POLL_TIMEOUT_MS: Final = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS: Final = 15 * 60 * 1000
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_DURATION_UNITS: Final[Mapping[str, int]] = {
    "": 1,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
}


def _lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items() if value is not None}


def _positive_int(options: dict[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option '{name}' must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"option '{name}' must be a positive integer, got {text!r}")
    return value


def _boolean(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise ValueError(f"option '{name}' must be true or false, got {text!r}")


def _duration_ms(options: dict[str, str], name: str, default: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    match = _DURATION.match(text.lower())
    if match is None or match.group(2) not in _DURATION_UNITS:
        raise ValueError(f"option '{name}' must be a duration such as '30s' or '5m', got {text!r}")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]


def client_settings(
    options: Mapping[str, Any], *, rejected: Mapping[str, str] = _SOURCE_REJECTED
) -> dict[str, Any]:
    """The `kafka.*` options as Moldau client settings, bootstrap servers included."""
    lowered = _lower_keys(options)
    bootstrap = lowered.get("kafka.bootstrap.servers") or lowered.get("bootstrap.servers")
    if not bootstrap:
        raise ValueError("option 'kafka.bootstrap.servers' is required (example: 127.0.0.1:9092)")
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap}
    for key, value in lowered.items():
        if not key.startswith("kafka."):
            continue
        name = key.removeprefix("kafka.")
        if name in rejected:
            raise ValueError(f"Kafka option '{name}' is not supported: {rejected[name]}")
        if name in _CONNECTOR_OWNED:
            continue
        if name not in CLIENT_SETTINGS:
            if name.startswith(_SECURITY_PREFIXES):
                raise ValueError(
                    f"Kafka option '{name}' is not supported by Moldau's client, and a security "
                    "setting is never dropped (see moldau/client/README.md for the ssl.* and "
                    "sasl.* settings it takes)"
                )
            continue
        settings[name] = value
    return settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """Which partitions to read: one of `assign`, `subscribe`, `subscribePattern`."""

    assign: Mapping[str, tuple[int, ...]] | None = None
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        if self.assign is not None:
            return topic in self.assign
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None and not topic.startswith("__")
        return topic in self.topics

    @property
    def fixed_topics(self) -> list[str] | None:
        """Topic names known without listing the cluster (None for a pattern)."""
        if self.assign is not None:
            return sorted(self.assign)
        return None if self.pattern is not None else list(self.topics)


def _subscription(options: dict[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if name in options]
    if len(given) != 1:
        raise ValueError(
            "exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be set"
            + (f" (got {len(given)})" if given else "")
        )
    if "assign" in options:
        try:
            parsed = json.loads(options["assign"])
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict) or not all(
            isinstance(parts, list) and all(isinstance(p, int) for p in parts)
            for parts in parsed.values()
        ):
            raise ValueError(
                'option \'assign\' must be JSON like {"topicA":[0,1],"topicB":[2,4]}, '
                f"got {options['assign']!r}"
            )
        return Subscription(assign={t: tuple(sorted(set(p))) for t, p in parsed.items()})
    if "subscribe" in options:
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise ValueError("option 'subscribe' must list at least one topic")
        return Subscription(topics=topics)
    pattern = options["subscribepattern"]
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
    return Subscription(pattern=pattern)


def _offset_spec(
    options: dict[str, str], *, which: str, default: int, streaming: bool
) -> OffsetSpec:
    """startingX / endingX: timestamp options first (Spark's precedence), then offsets."""
    timestamp = options.get(f"{which}timestamp")
    if timestamp is not None:
        try:
            return OffsetSpec(global_timestamp=int(timestamp))
        except ValueError:
            raise ValueError(
                f"option '{which}Timestamp' must be milliseconds since the epoch, got {timestamp!r}"
            ) from None
    by_timestamp = options.get(f"{which}offsetsbytimestamp")
    if by_timestamp is not None:
        return OffsetSpec(
            timestamps=parse_partition_json(by_timestamp, option=f"{which}OffsetsByTimestamp")
        )
    name = f"{which}Offsets"
    text = options.get(name.lower())
    if text is None:
        return OffsetSpec(default=default)
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        spec = OffsetSpec(default=EARLIEST if word == "earliest" else LATEST)
    else:
        spec = OffsetSpec(default=default, offsets=parse_partition_json(text, option=name))
    if which == "starting" and not streaming and LATEST in spec.all_values():
        raise ValueError("option 'startingOffsets' may not be 'latest' (-1) for batch queries")
    if which == "ending" and EARLIEST in spec.all_values():
        raise ValueError("option 'endingOffsets' may not be 'earliest' (-2)")
    return spec


def source_registry_options(options: Mapping[str, Any]) -> RegistryOptions | None:
    """The source's registry options alone (for its schema, batch or streaming alike)."""
    lowered = _lower_keys(options)
    topics = _subscription(lowered).fixed_topics
    return parse_registry_options(
        lowered, topic=topics[0] if topics and len(topics) == 1 else None, sink=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """A validated source configuration (both batch and streaming)."""

    client: Mapping[str, Any]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    starting_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    commit_group: str | None = None
    # keys and values in the schema registry's wire format, decoded (None: bytes)
    registry: RegistryOptions | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        return str(self.client.get("isolation.level", "read_committed")) == "read_committed"

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
        lowered = _lower_keys(options)
        client = client_settings(lowered)
        client.setdefault("isolation.level", "read_committed")
        if client["isolation.level"] not in ("read_committed", "read_uncommitted"):
            raise ValueError(
                "option 'kafka.isolation.level' must be read_committed or read_uncommitted"
            )
        if not streaming:
            for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if name.lower() in lowered:
                    raise ValueError(f"option '{name}' applies to streaming queries only")
        elif any(k.startswith("ending") for k in lowered):
            raise ValueError(
                "options 'endingOffsets' / 'endingTimestamp' / 'endingOffsetsByTimestamp' "
                "apply to batch queries only"
            )
        strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(
                "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'"
            )
        min_offsets = _positive_int(lowered, "minOffsetsPerTrigger")
        max_offsets = _positive_int(lowered, "maxOffsetsPerTrigger")
        if min_offsets and max_offsets and min_offsets > max_offsets:
            raise ValueError("option 'minOffsetsPerTrigger' is larger than 'maxOffsetsPerTrigger'")
        commit_group = None
        if _boolean(lowered, "commitOffsetsToGroup", "kafka.group.id" in lowered):
            commit_group = lowered.get("kafka.group.id")
            if not commit_group:
                raise ValueError(
                    "option 'commitOffsetsToGroup' needs 'kafka.group.id' (the group to commit to)"
                )
        return cls(
            client=client,
            subscription=_subscription(lowered),
            starting=_offset_spec(
                lowered,
                which="starting",
                default=LATEST if streaming else EARLIEST,
                streaming=streaming,
            ),
            ending=None
            if streaming
            else _offset_spec(lowered, which="ending", default=LATEST, streaming=False),
            starting_timestamp_strategy=strategy,
            fail_on_data_loss=_boolean(lowered, "failOnDataLoss", True),
            include_headers=_boolean(lowered, "includeHeaders", False),
            min_partitions=_positive_int(lowered, "minPartitions"),
            max_records_per_partition=_positive_int(lowered, "maxRecordsPerPartition"),
            max_offsets_per_trigger=max_offsets,
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=_duration_ms(
                lowered, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS
            ),
            poll_timeout_ms=_positive_int(lowered, "kafkaConsumer.pollTimeoutMs")
            or DEFAULT_POLL_TIMEOUT_MS,
            commit_group=commit_group,
            registry=source_registry_options(lowered),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkOptions:
    """A validated sink configuration."""

    client: Mapping[str, Any]
    topic: str | None = None
    exactly_once: bool = False
    transaction_timeout_ms: int = 60_000
    # exactlyOnce: transactional ids are `<prefix>-<batchId>-<partitionId>`; None: derived from
    # the query id in the checkpoint (`moldau-spark-<queryId>`).
    transactional_id_prefix: str | None = None
    # struct (or other) columns encoded in the schema registry's wire format (None: bytes)
    registry: RegistryOptions | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool = False) -> SinkOptions:
        lowered = _lower_keys(options)
        client = client_settings(lowered, rejected=_SINK_REJECTED)
        topic = lowered.get("topic") or None
        exactly_once = _boolean(lowered, "exactlyOnce", False)
        if exactly_once and not streaming:
            raise ValueError(
                "option 'exactlyOnce' applies to streaming writes only (writeStream); "
                "a batch write is one Spark job that a failure may run again"
            )
        prefix = lowered.get("transactionalidprefix") or None
        if prefix is not None and not exactly_once:
            raise ValueError("option 'transactionalIdPrefix' needs 'exactlyOnce' set to true")
        return cls(
            client=client,
            topic=topic,
            exactly_once=exactly_once,
            transaction_timeout_ms=_positive_int(lowered, "kafka.transaction.timeout.ms") or 60_000,
            transactional_id_prefix=prefix,
            registry=parse_registry_options(lowered, topic=topic, sink=True),
        )
