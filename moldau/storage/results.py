"""Values returned by `PartitionLog`: append and read results, timestamp lookups."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from moldau.storage.segment import FileRegion

__all__ = ["AppendOrigin", "AppendResult", "ReadResult", "TimestampOffset"]


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's `AppendOrigin`): clients are checked for sequences and may not write
    control batches; coordinators write transaction markers; replication copies the leader."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class AppendResult(NamedTuple):
    """A tuple rather than a dataclass: it is built once per produced batch on the hot path."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool = False  # an idempotent retry: the offsets are the original batch's


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    regions: tuple[FileRegion, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    next_offset: int  # after the last batch returned (the fetch offset if none)

    @property
    def size(self) -> int:
        return sum(region.length for region in self.regions)

    def read_bytes(self) -> bytes:
        """The record bytes (a copy: for tests and TLS, not for the sendfile path)."""
        return b"".join(region.read_bytes() for region in self.regions)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimestampOffset:
    timestamp: int
    offset: int
    leader_epoch: int
    # False: not the record but the first offset of the batch holding it, found without reading
    # the batch (a lookup with read_records=False); ask again with read_records=True
    exact: bool = True
