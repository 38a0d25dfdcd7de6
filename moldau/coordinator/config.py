"""The group coordinator's settings, read from the broker properties of the same Kafka names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class PropertySource(Protocol):
    def get(self, name: str) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2_147_483_647
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_share_session_timeout_ms: int = 45_000

    @classmethod
    def from_properties(cls, properties: PropertySource) -> GroupCoordinatorConfig:
        """Read `offsets.*`, `offset.*` and `group.*` from a BrokerConfig (or any `get(name)`)."""

        def number(name: str, default: int) -> int:
            value = properties.get(name)
            return default if value is None else int(value)

        defaults = cls()
        return cls(
            offsets_topic_num_partitions=number(
                "offsets.topic.num.partitions", defaults.offsets_topic_num_partitions
            ),
            group_initial_rebalance_delay_ms=number(
                "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
            ),
            group_min_session_timeout_ms=number(
                "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
            ),
            group_max_session_timeout_ms=number(
                "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
            ),
            group_max_size=number("group.max.size", defaults.group_max_size),
            offset_metadata_max_bytes=number(
                "offset.metadata.max.bytes", defaults.offset_metadata_max_bytes
            ),
            offsets_retention_ms=number("offsets.retention.minutes", 10080) * 60_000,
            offsets_retention_check_interval_ms=number(
                "offsets.retention.check.interval.ms",
                defaults.offsets_retention_check_interval_ms,
            ),
            group_consumer_session_timeout_ms=number(
                "group.consumer.session.timeout.ms", defaults.group_consumer_session_timeout_ms
            ),
            group_consumer_heartbeat_interval_ms=number(
                "group.consumer.heartbeat.interval.ms",
                defaults.group_consumer_heartbeat_interval_ms,
            ),
            group_share_session_timeout_ms=number(
                "group.share.session.timeout.ms", defaults.group_share_session_timeout_ms
            ),
        )
