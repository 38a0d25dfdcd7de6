"""`LogConfig`: the topic configs the log acts on (Kafka's `LogConfig`), under their Kafka names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LogConfig"]

_WEEK_MS = 7 * 24 * 3600 * 1000
_LONG_MAX = 9223372036854775807

_FIELD_BY_NAME = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "preallocate": "preallocate",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "min.insync.replicas": "min_insync_replicas",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = _WEEK_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = _WEEK_MS
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    preallocate: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1

    @classmethod
    def from_topic_config(cls, mapping: Mapping[str, Any]) -> LogConfig:
        """Build from `BrokerConfig.topic_config(overrides)` (Kafka topic config names, parsed
        values). Unknown names are ignored; `None` keeps the default."""
        values: dict[str, Any] = {}
        for name, field_name in _FIELD_BY_NAME.items():
            value = mapping.get(name)
            if value is None:
                continue
            if field_name == "cleanup_policy":
                items = value.split(",") if isinstance(value, str) else list(value)
                value = tuple(sorted(str(item).strip() for item in items if str(item).strip()))
            elif field_name == "min_cleanable_dirty_ratio":
                value = float(value)
            elif field_name == "preallocate":
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            elif field_name in ("message_timestamp_type", "compression_type"):
                value = str(value)
            else:
                value = int(value)
            values[field_name] = value
        return cls(**values)

    def compression_level(self, codec: int) -> int | None:
        """The level this topic's batches are compressed at with `codec` (None: no levels)."""
        return {
            1: self.compression_gzip_level,
            3: self.compression_lz4_level,
            4: self.compression_zstd_level,
        }.get(int(codec))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries_bytes(self) -> int:
        return self.segment_index_bytes
