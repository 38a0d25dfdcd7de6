"""The record batches a share fetch read, as acquisition sees them: each batch's offsets, whether
its records may be delivered, and where its bytes lie in what was read.

Control batches (transaction markers) are never delivered. Under read_committed the fetch also
gives the aborted transactions of the range read, (producer id, first offset) pairs: as a
consumer does (Kafka's CompletedFetch), a transactional batch of a producer whose aborted
transaction began at or before the batch, and whose ABORT marker has not yet been passed, holds
aborted records. The share consumer has no aborted-transactions list of its own (ShareFetch
carries none), so the leader archives those records instead of delivering them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.records import ControlRecordType, iter_batches, parse_control_record
from moldau.share.share_partition import AcquiredRecords, LogBatch


@dataclass(frozen=True, slots=True)
class ReadBatch:
    batch: LogBatch
    start: int  # its bytes: data[start:end]
    end: int


def read_batches(
    data: bytes | memoryview, aborted_transactions: Sequence[tuple[int, int]] | None = None
) -> list[ReadBatch]:
    """The complete batches of `data`, in offset order."""
    pending = sorted(aborted_transactions or (), key=lambda pair: pair[1])
    aborting: set[int] = set()  # producers whose aborted transaction is in progress
    batches = []
    for batch in iter_batches(data):
        header = batch.header
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        deliverable = True
        if header.is_control:
            deliverable = False
            if header.producer_id in aborting:
                for record in batch.records():
                    if parse_control_record(record)[0] == ControlRecordType.ABORT:
                        aborting.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in aborting:
            deliverable = False
        batches.append(
            ReadBatch(
                LogBatch(header.base_offset, header.last_offset, deliverable),
                batch.position,
                batch.position + len(batch.data),
            )
        )
    return batches


def acquired_bytes(
    data: bytes | memoryview, batches: Sequence[ReadBatch], acquired: Sequence[AcquiredRecords]
) -> bytes:
    """The bytes of the batches holding acquired records (what the member is sent)."""
    if not acquired:
        return b""
    pieces = []
    index = 0
    for read in batches:
        while index < len(acquired) and acquired[index].last_offset < read.batch.first_offset:
            index += 1
        if index == len(acquired):
            break
        if acquired[index].first_offset <= read.batch.last_offset:
            pieces.append(bytes(data[read.start : read.end]))
    return b"".join(pieces)
