"""Leader-side checks of a produce buffer beyond framing and CRC, Kafka's `LogValidator`.

From the headers only: no control batches from clients, timestamps within
`message.timestamp.before.max.ms` / `after.max.ms` (CreateTime), and no more records per batch
than the topic's `BatchLimits` allow. Reading records only where a config demands it: compacted
topics refuse records without a key (INVALID_RECORD), and a topic `compression.type` other than
`producer` recompresses batches written with another codec. Those reads never build a record:
they scan the decompressed bytes (framing, count, keys), and recompression compresses the same
record bytes again. What they read is bounded per batch (`BatchLimits`) and per produce request
(`DecodeBudget`), so a request never costs much more than its own bytes would uncompressed.
"""

from __future__ import annotations

import functools

from moldau.protocol.batch_layout import CONTROL_BIT, HEADER_SIZE, MAX_EXPANSION, MIN_RECORD_SIZE
from moldau.protocol.compression import CompressionType, compress, decompress
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import scan_records
from moldau.protocol.records import BatchHeader, BatchLimits, batch_with_payload, validate_batches
from moldau.storage.config import LogConfig

__all__ = [
    "DecodeBudget",
    "batch_limits",
    "fast_path_limits",
    "storage_error",
    "target_compression",
    "validate_for_leader",
]


def batch_limits(config: LogConfig) -> BatchLimits:
    return _limits_for(config.max_message_bytes)


@functools.lru_cache(maxsize=64)  # once per distinct max.message.bytes, not once per append
def _limits_for(max_message_bytes: int) -> BatchLimits:
    return BatchLimits.for_max_batch_bytes(max_message_bytes)


class DecodeBudget:
    """What the batches of one produce request may cost to read together: records and decoded
    bytes up to MAX_EXPANSION times what the request's bytes hold uncompressed, plus one batch's
    worth (its `BatchLimits`). A batch's records are counted from its header before it is read;
    its decoded bytes as it is read. Shared by every partition of the request; past it, the
    request's remaining batches are refused (CORRUPT_MESSAGE: retriable, in a smaller request)."""

    __slots__ = ("carried", "decoded", "records")

    def __init__(self) -> None:
        self.carried = 0  # bytes of the request's record sets seen so far
        self.decoded = 0
        self.records = 0

    def admit(self, header: BatchHeader, limits: BatchLimits) -> None:
        """Count a batch's records before it is read."""
        self.records += header.records_count
        if self.records > limits.max_records + MAX_EXPANSION * self.carried // MIN_RECORD_SIZE:
            raise self._spent()

    def spend(self, decoded: int, limits: BatchLimits) -> None:
        """Count the bytes a batch decoded to."""
        self.decoded += decoded
        if self.decoded > limits.max_decoded_bytes + MAX_EXPANSION * self.carried:
            raise self._spent()

    @staticmethod
    def _spent() -> KafkaError:
        return KafkaError(
            ErrorCode.corrupt_message,
            f"the batches of this request decode to more than {MAX_EXPANSION} times its size: "
            "send them in smaller requests",
        )


def target_compression(config: LogConfig) -> CompressionType | None:
    """The codec the topic forces, or None for `producer` (keep what the producer chose)."""
    name = config.compression_type
    if name == "producer":
        return None
    if name == "uncompressed":
        return CompressionType.NONE
    return CompressionType.from_name(name)


def validate_for_leader(
    view: memoryview,
    config: LogConfig,
    *,
    now: int,
    from_client: bool,
    budget: DecodeBudget | None = None,
) -> tuple[memoryview, list[tuple[int, BatchHeader]]]:
    """Validate a produce buffer; returns the buffer to append (recompressed if the topic says
    so) and its batches as (position, header). `budget` is the request's (one per append
    without it)."""
    limits = batch_limits(config)
    batches = validate_batches(
        view, max_batch_size=config.max_message_bytes, max_records=limits.max_records
    )
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
    if budget is None:
        budget = DecodeBudget()
    budget.carried += len(view)
    rewritten = False
    parts: list[bytes | memoryview] = []
    for position, header in batches:
        data = view[position : position + header.size]
        if header.is_control:
            parts.append(data)
            continue
        budget.admit(header, limits)
        if target is None or header.compression is target:
            decoded = scan_records(
                data,
                max_size=limits.max_decoded_bytes,
                max_records=limits.max_records,
                require_keys=config.compact,
            )
            budget.spend(decoded, limits)
            parts.append(data)
            continue
        payload = decompress(
            header.compression, data[HEADER_SIZE:], max_size=limits.max_decoded_bytes
        )
        scan_records(data, max_size=len(payload), require_keys=config.compact, pieces=[payload])
        budget.spend(len(payload), limits)
        rewritten = True
        level = config.compression_level(target)
        parts.append(
            batch_with_payload(header, compress(target, payload, level), compression=target)
        )
    if not rewritten:
        return view, batches
    view = memoryview(b"".join(parts))
    return view, validate_batches(view, max_batch_size=None)


def fast_path_limits(config: LogConfig) -> tuple[int, int, int, int, bool]:
    """What the produce fast path checks; its flag is False for configs it does not handle."""
    plain = (
        not config.log_append_time and not config.compact and config.compression_type == "producer"
    )
    return (
        config.max_message_bytes,
        batch_limits(config).max_records,
        config.message_timestamp_after_max_ms,
        config.message_timestamp_before_max_ms,
        plain,
    )


def storage_error(topic_partition: object, error: OSError) -> KafkaError:
    """A failed disk operation, answered as Kafka does (KAFKA_STORAGE_ERROR)."""
    return KafkaError(ErrorCode.kafka_storage_error, f"{topic_partition}: {error}")
