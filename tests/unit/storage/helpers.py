"""Shared helpers for storage tests: batches to append and a log over an in-memory file system."""

from __future__ import annotations

from moldau.clock import ManualClock
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem
from moldau.storage.log_loader import load_partition_log
from moldau.storage.partition_log import PartitionLog
from moldau.types import TopicPartition

TP = TopicPartition("events", 0)
DIRECTORY = "/data/events-0"


def batch(
    *values: bytes, key: bytes | None = None, timestamp: int | None = None, **kwargs: object
) -> bytes:
    return build_batch(
        [NewRecord(key=key, value=v, timestamp=timestamp) for v in values],
        timestamp=kwargs.pop("base_timestamp", 1_700_000_000_000),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def open_log(
    filesystem: FileSystem,
    clock: ManualClock,
    config: LogConfig | None = None,
    **kwargs: object,
) -> PartitionLog:
    filesystem.makedirs("/data")
    return load_partition_log(
        filesystem,
        DIRECTORY,
        TP,
        config or LogConfig(),
        clock=clock,
        **kwargs,  # type: ignore[arg-type]
    )


def values_from(
    log: PartitionLog, start: int = 0, max_bytes: int = 1 << 30
) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) readable from `start` up to the log end offset."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=max_bytes, max_offset=log.log_end_offset)
        data = result.read_bytes()
        if not data:
            break
        for found in iter_batches(data):
            assert found.is_valid()
            for record in decode_records(found.data):
                if record.offset >= offset:
                    out.append((record.offset, record.value))
            offset = found.header.next_offset
    return out
