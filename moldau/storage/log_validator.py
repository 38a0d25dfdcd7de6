"""Leader-side checks of a produce buffer beyond framing and CRC, Kafka's `LogValidator`.

From the headers only: no control batches from clients, timestamps within
`message.timestamp.before.max.ms` / `after.max.ms` (CreateTime). Decoding records only where a
config demands it: compacted topics refuse records without a key (INVALID_RECORD), and a topic
`compression.type` other than `producer` recompresses batches written with another codec.
"""

from __future__ import annotations

from moldau.protocol.compression import CompressionType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import (
    CONTROL_BIT,
    BatchHeader,
    RecordBatch,
    rebuild_batch,
    validate_batches,
)
from moldau.storage.config import LogConfig

__all__ = ["fast_path_limits", "storage_error", "target_compression", "validate_for_leader"]


def target_compression(config: LogConfig) -> CompressionType | None:
    """The codec the topic forces, or None for `producer` (keep what the producer chose)."""
    name = config.compression_type
    if name == "producer":
        return None
    if name == "uncompressed":
        return CompressionType.NONE
    return CompressionType.from_name(name)


def validate_for_leader(
    view: memoryview, config: LogConfig, *, now: int, from_client: bool
) -> tuple[memoryview, list[tuple[int, BatchHeader]]]:
    """Validate a produce buffer; returns the buffer to append (recompressed if the topic says
    so) and its batches as (position, header)."""
    batches = validate_batches(view, max_batch_size=config.max_message_bytes)
    if config.log_append_time:
        latest = earliest = -1
    else:
        latest = now + config.message_timestamp_after_max_ms
        earliest = now - config.message_timestamp_before_max_ms
    for _position, header in batches:
        # tuple indexes, not field names: this runs once per produced batch
        if header[5] & CONTROL_BIT and from_client:
            raise KafkaError(ErrorCode.invalid_record, "clients may not write control batches")
        if latest >= 0 and (header[8] > latest or 0 <= header[7] < earliest):
            raise KafkaError(
                ErrorCode.invalid_timestamp,
                f"timestamp {header.max_timestamp} is outside the accepted range around {now}",
            )
    target = target_compression(config)
    if not config.compact and target is None:
        return view, batches
    rewritten = False
    parts: list[bytes | memoryview] = []
    for position, header in batches:
        data = view[position : position + header.size]
        if header.is_control:
            parts.append(data)
            continue
        records = RecordBatch(position, header, data).records(
            max_size=config.max_message_bytes * 16
        )
        if config.compact and any(record.key is None for record in records):
            raise KafkaError(
                ErrorCode.invalid_record, "a compacted topic does not accept records without a key"
            )
        if target is None or header.compression is target:
            parts.append(data)
            continue
        rewritten = True
        parts.append(rebuild_batch(header, records, compression=target))
    if not rewritten:
        return view, batches
    view = memoryview(b"".join(parts))
    return view, validate_batches(view, max_batch_size=None)


def fast_path_limits(config: LogConfig) -> tuple[int, int, int, bool]:
    """What the produce fast path checks; its flag is False for configs it does not handle."""
    plain = (
        not config.log_append_time and not config.compact and config.compression_type == "producer"
    )
    return (
        config.max_message_bytes,
        config.message_timestamp_after_max_ms,
        config.message_timestamp_before_max_ms,
        plain,
    )


def storage_error(topic_partition: object, error: OSError) -> KafkaError:
    """A failed disk operation, answered as Kafka does (KAFKA_STORAGE_ERROR)."""
    return KafkaError(ErrorCode.kafka_storage_error, f"{topic_partition}: {error}")
