"""Share groups' settings (KIP-932): the `group.share.*` broker properties Moldau acts on, the
`share.*` group configs (config resources of type GROUP, KIP-848's dynamic group configs) and
what a group's effective settings are, its own over the broker's.

Bounds as Kafka 4.1 checks them: a broker's record lock duration, session timeout and heartbeat
interval lie within its min/max properties (a node whose properties do not stops at start), and
a group's own values within the same bounds (INVALID_CONFIG otherwise), its heartbeat interval
below its session timeout. A group config Moldau does not act on (`consumer.*` and `streams.*`,
which Kafka 4.1 also has) is refused, never stored unheeded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from moldau.config.keys import ConfigKey, ConfigType, config_key

INT, STRING = ConfigType.INT, ConfigType.STRING

SHARE_BROKER_KEYS: tuple[ConfigKey, ...] = (
    config_key(
        "group.share.delivery.count.limit",
        INT,
        5,
        "How many times a record of a share group is delivered before it is archived: a record "
        "released (or whose acquisition lock runs out) that often is never delivered again.",
        minimum=2,
        maximum=10,
        read_only=True,
    ),
    config_key(
        "group.share.record.lock.duration.ms",
        INT,
        30000,
        "How long a share group member holds the records it acquired before they become "
        "available to others (the default of each group's share.record.lock.duration.ms).",
        minimum=1000,
        maximum=3600000,
        read_only=True,
    ),
    config_key(
        "group.share.min.record.lock.duration.ms",
        INT,
        15000,
        "The shortest record lock duration a group may set.",
        minimum=1000,
        maximum=30000,
        read_only=True,
    ),
    config_key(
        "group.share.max.record.lock.duration.ms",
        INT,
        60000,
        "The longest record lock duration a group may set.",
        minimum=30000,
        maximum=3600000,
        read_only=True,
    ),
    config_key(
        "group.share.partition.max.record.locks",
        INT,
        2000,
        "How many records a share-partition keeps in flight (from its start offset to its "
        "end offset) before it stops acquiring new ones.",
        minimum=100,
        maximum=10000,
        read_only=True,
    ),
    config_key(
        "group.share.max.share.sessions",
        INT,
        2000,
        "How many share sessions a broker keeps; a new one beyond is refused "
        "(SHARE_SESSION_LIMIT_REACHED).",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.session.timeout.ms",
        INT,
        45000,
        "How long a share group member may go without a heartbeat before it is removed (the "
        "default of each group's share.session.timeout.ms).",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.min.session.timeout.ms",
        INT,
        45000,
        "The shortest session timeout a group may set.",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.max.session.timeout.ms",
        INT,
        60000,
        "The longest session timeout a group may set.",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.heartbeat.interval.ms",
        INT,
        5000,
        "The heartbeat interval given to share group members (the default of each group's "
        "share.heartbeat.interval.ms).",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.min.heartbeat.interval.ms",
        INT,
        5000,
        "The shortest heartbeat interval a group may set.",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.max.heartbeat.interval.ms",
        INT,
        15000,
        "The longest heartbeat interval a group may set.",
        minimum=1,
        read_only=True,
    ),
    config_key(
        "group.share.max.size",
        INT,
        200,
        "How many members a share group may have.",
        minimum=1,
        maximum=1000,
        read_only=True,
    ),
)

SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"

GROUP_KEYS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        config_key(
            SESSION_TIMEOUT,
            INT,
            45000,
            "How long a member of this share group may go without a heartbeat.",
            minimum=1,
        ),
        config_key(
            HEARTBEAT_INTERVAL,
            INT,
            5000,
            "The heartbeat interval given to this share group's members.",
            minimum=1,
        ),
        config_key(
            RECORD_LOCK_DURATION,
            INT,
            30000,
            "How long a member of this share group holds the records it acquired.",
            minimum=1000,
        ),
        config_key(
            AUTO_OFFSET_RESET,
            STRING,
            "latest",
            "Where this share group starts reading a partition it has no state for: latest "
            "(the end), earliest (the log start) or by_duration:<ISO-8601 duration> (the first "
            "record that recent).",
        ),
        config_key(
            ISOLATION_LEVEL,
            STRING,
            "read_uncommitted",
            "read_committed: deliver committed transactional records only; read_uncommitted: "
            "every record below the high watermark.",
            valid_values=("read_committed", "read_uncommitted"),
        ),
    )
}
# The broker property each group config defaults to.
BROKER_DEFAULTS = {
    SESSION_TIMEOUT: "group.share.session.timeout.ms",
    HEARTBEAT_INTERVAL: "group.share.heartbeat.interval.ms",
    RECORD_LOCK_DURATION: "group.share.record.lock.duration.ms",
}
# Kafka 4.1's other group configs, which Moldau refuses rather than ignore.
UNSUPPORTED_GROUP_KEYS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "streams.session.timeout.ms": None,
    "streams.heartbeat.interval.ms": None,
    "streams.num.standby.replicas": None,
}

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+)(?:\.(?P<fraction>\d{1,9}))?S)?)?",
    re.IGNORECASE,
)


class InvalidGroupConfig(ValueError):
    """A group config value or name that cannot be set (INVALID_CONFIG)."""


class PropertySource(Protocol):
    def get(self, name: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """share.auto.offset.reset parsed: where a share-partition without state starts."""

    strategy: str  # "latest", "earliest" or "by_duration"
    duration_ms: int = 0

    @classmethod
    def parse(cls, value: str) -> AutoOffsetReset:
        text = value.strip().lower()
        if text in ("latest", "earliest"):
            return cls(text)
        if text.startswith("by_duration:"):
            return cls("by_duration", _duration_ms(value.strip()[len("by_duration:") :]))
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: it must be latest, "
            "earliest or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)"
        )


def _duration_ms(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if match is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        raise InvalidGroupConfig(
            f"Invalid duration {text} for {AUTO_OFFSET_RESET}: an ISO-8601 duration such as "
            "PT15M or P1DT2H is expected"
        )
    parts = {name: int(found) if found else 0 for name, found in match.groupdict().items()}
    fraction = (match.group("fraction") or "").ljust(3, "0")[:3]
    return (
        ((parts["days"] * 24 + parts["hours"]) * 60 + parts["minutes"]) * 60 + parts["seconds"]
    ) * 1000 + int(fraction or 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupConfig:
    """The broker's group.share.* properties."""

    delivery_count_limit: int = 5
    record_lock_duration_ms: int = 30000
    min_record_lock_duration_ms: int = 15000
    max_record_lock_duration_ms: int = 60000
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000
    session_timeout_ms: int = 45000
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    heartbeat_interval_ms: int = 5000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000
    max_size: int = 200

    @classmethod
    def from_properties(cls, properties: PropertySource) -> ShareGroupConfig:
        """Read the group.share.* properties; InvalidGroupConfig when they contradict."""
        defaults = cls()
        config = cls(
            **{
                # group.share.record.lock.duration.ms -> record_lock_duration_ms
                (field := key.name.removeprefix("group.share.").replace(".", "_")): (
                    getattr(defaults, field)
                    if properties.get(key.name) is None
                    else int(properties.get(key.name))
                )
                for key in SHARE_BROKER_KEYS
            }
        )
        config.check()
        return config

    def check(self) -> None:
        for name, value, low, high in (
            (
                "group.share.record.lock.duration.ms",
                self.record_lock_duration_ms,
                self.min_record_lock_duration_ms,
                self.max_record_lock_duration_ms,
            ),
            (
                "group.share.session.timeout.ms",
                self.session_timeout_ms,
                self.min_session_timeout_ms,
                self.max_session_timeout_ms,
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                self.min_heartbeat_interval_ms,
                self.max_heartbeat_interval_ms,
            ),
        ):
            if not low <= value <= high:
                low_name = name.replace("group.share.", "group.share.min.")
                high_name = name.replace("group.share.", "group.share.max.")
                raise InvalidGroupConfig(
                    f"{name} is {value}; it must lie between {low_name} ({low}) and "
                    f"{high_name} ({high}): set those too"
                )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidGroupConfig(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupSettings:
    """One share group's effective settings: its group configs over the broker's."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    record_lock_duration_ms: int
    auto_offset_reset: AutoOffsetReset
    isolation_level: int

    @classmethod
    def of(cls, configs: Mapping[str, str], broker: ShareGroupConfig) -> ShareGroupSettings:
        """Values stored in the metadata were checked when set; one that no longer parses (a
        broker property changed since) falls back to the broker's."""

        def number(name: str, default: int) -> int:
            try:
                return int(configs[name])
            except (KeyError, ValueError):
                return default

        try:
            reset = AutoOffsetReset.parse(configs.get(AUTO_OFFSET_RESET, "latest"))
        except InvalidGroupConfig:
            reset = AutoOffsetReset("latest")
        isolation = configs.get(ISOLATION_LEVEL, "read_uncommitted").strip().lower()
        return cls(
            session_timeout_ms=number(SESSION_TIMEOUT, broker.session_timeout_ms),
            heartbeat_interval_ms=number(HEARTBEAT_INTERVAL, broker.heartbeat_interval_ms),
            record_lock_duration_ms=number(RECORD_LOCK_DURATION, broker.record_lock_duration_ms),
            auto_offset_reset=reset,
            isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
        )


def group_key(name: str) -> ConfigKey:
    """The group config `name`; InvalidGroupConfig for one Moldau does not act on."""
    key = GROUP_KEYS.get(name)
    if key is not None:
        return key
    if name in UNSUPPORTED_GROUP_KEYS:
        broker_key = UNSUPPORTED_GROUP_KEYS[name]
        instead = f"; {broker_key} applies to every group" if broker_key else ""
        raise InvalidGroupConfig(
            f"Moldau does not support the group config {name}: only the share.* group configs "
            f"({', '.join(sorted(GROUP_KEYS))}) are{instead}"
        )
    raise InvalidGroupConfig(f"Unknown group config name: {name}")


def validate_group_configs(configs: Mapping[str, str], broker: ShareGroupConfig) -> None:
    """Check a group's configs as they would be after a change (InvalidGroupConfig)."""
    for name, value in configs.items():
        key = group_key(name)
        if key.type is INT:
            try:
                number = int(value)
            except ValueError:
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: Not a number of type INT"
                ) from None
            if key.minimum is not None and number < key.minimum:
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: Value must be at least "
                    f"{int(key.minimum)}"
                )
        elif key.valid_values is not None and value.strip().lower() not in key.valid_values:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: String must be one of: "
                f"{', '.join(key.valid_values)}"
            )
    settings = ShareGroupSettings.of(configs, broker)
    if AUTO_OFFSET_RESET in configs:
        AutoOffsetReset.parse(configs[AUTO_OFFSET_RESET])
    for name, setting, low, high in (
        (
            RECORD_LOCK_DURATION,
            settings.record_lock_duration_ms,
            broker.min_record_lock_duration_ms,
            broker.max_record_lock_duration_ms,
        ),
        (
            SESSION_TIMEOUT,
            settings.session_timeout_ms,
            broker.min_session_timeout_ms,
            broker.max_session_timeout_ms,
        ),
        (
            HEARTBEAT_INTERVAL,
            settings.heartbeat_interval_ms,
            broker.min_heartbeat_interval_ms,
            broker.max_heartbeat_interval_ms,
        ),
    ):
        if name in configs and not low <= setting <= high:
            raise InvalidGroupConfig(
                f"{name} must be between {low} and {high} (the broker's "
                f"{BROKER_DEFAULTS[name].replace('group.share.', 'group.share.min.')} and "
                f"{BROKER_DEFAULTS[name].replace('group.share.', 'group.share.max.')})"
            )
    if settings.heartbeat_interval_ms >= settings.session_timeout_ms:
        raise InvalidGroupConfig(f"{HEARTBEAT_INTERVAL} must be less than {SESSION_TIMEOUT}")
