"""Idempotent and transactional producer state of a partition, Kafka's `ProducerStateManager`.

Per producer id: its epoch, the last 5 batches (sequence range → offset range) for duplicate
detection, the coordinator epoch and the first offset of its open transaction. Rules on append
(as Kafka's `ProducerAppendInfo`): an older epoch is fenced (INVALID_PRODUCER_EPOCH); a batch equal
to one of the last 5 is a duplicate (answered with its original offsets); otherwise a known epoch
needs the next sequence and a new epoch needs sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER).

    <20-digit offset>.snapshot (Kafka's snapshot v1):
      version int16 (1), crc uint32 (CRC-32C of what follows), count int32, then per producer:
      producerId int64, producerEpoch int16, lastSequence int32, lastOffset int64,
      offsetDelta int32, timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

import crc32c

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import BatchHeader, ControlRecordType, parse_control_record
from moldau.storage.transaction_index import AbortedTransaction

__all__ = ["SNAPSHOT_SUFFIX", "BatchMetadata", "ProducerStateEntry", "ProducerStateManager"]

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_RECENT_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True, kw_only=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=_RECENT_BATCHES))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            batches=deque(self.batches, maxlen=_RECENT_BATCHES),
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
            last_timestamp=self.last_timestamp,
        )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        last_sequence = header.last_sequence
        for batch in self.batches:
            if (
                batch.first_sequence == header.base_sequence
                and batch.last_sequence == last_sequence
            ):
                return batch
        return None


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset of an open transaction -> producer id

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing) if self.ongoing else None

    def copy_entry(self, producer_id: int) -> ProducerStateEntry:
        entry = self.producers.get(producer_id)
        return ProducerStateEntry(producer_id=producer_id) if entry is None else entry.copy()

    @staticmethod
    def next_sequence(entry: ProducerStateEntry) -> int:
        """The base sequence `entry`'s producer must send next in its epoch."""
        last = entry.last_sequence
        return 0 if last in (-1, _INT32_MAX) else last + 1

    @staticmethod
    def check(entry: ProducerStateEntry, header: BatchHeader) -> BatchMetadata | None:
        """Check a client batch against `entry`; a duplicate returns the original batch."""
        epoch = header.producer_epoch
        if entry.producer_epoch >= 0 and epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"producer {header.producer_id} epoch {epoch} is older than {entry.producer_epoch}",
            )
        if header.base_sequence < 0:
            return None
        if epoch == entry.producer_epoch:
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                return duplicate
            expected = ProducerStateManager.next_sequence(entry)
            if header.base_sequence != expected:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {header.producer_id}: sequence {header.base_sequence}, expected {expected}",
                )
        elif entry.producer_epoch >= 0 and header.base_sequence != 0:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {header.producer_id}: new epoch {epoch} must start at sequence 0",
            )
        return None

    def check_markers(self, view: memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """Fence transaction markers from an older producer epoch (INVALID_PRODUCER_EPOCH) or an
        older coordinator (TRANSACTION_COORDINATOR_FENCED), as Kafka does."""
        for position, header in batches:
            if not header.is_control or header.producer_id < 0:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is None:
                continue
            if header.producer_epoch < entry.producer_epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"marker epoch {header.producer_epoch} is older than {entry.producer_epoch}",
                )
            _control_type, coordinator_epoch = control_type_of(
                view[position : position + header.size]
            )
            if coordinator_epoch < entry.coordinator_epoch:
                raise KafkaError(
                    ErrorCode.transaction_coordinator_fenced,
                    f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}",
                )

    @staticmethod
    def update_entry(entry: ProducerStateEntry, header: BatchHeader) -> None:
        """Apply a data batch (with its final offsets) to `entry`."""
        if header.producer_epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = header.producer_epoch
        if header.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(
                    first_sequence=header.base_sequence,
                    last_sequence=header.last_sequence,
                    first_offset=header.base_offset,
                    last_offset=header.last_offset,
                    timestamp=header.max_timestamp,
                )
            )
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset

    def commit_entry(self, entry: ProducerStateEntry) -> None:
        """Store `entry` (a checked and updated copy) and its open transaction."""
        previous = self.producers.get(entry.producer_id)
        if previous is not None and previous.current_txn_first_offset >= 0:
            self.ongoing.pop(previous.current_txn_first_offset, None)
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self.ongoing[entry.current_txn_first_offset] = entry.producer_id

    def apply_batch(
        self,
        header: BatchHeader,
        *,
        control_type: ControlRecordType | None = None,
        coordinator_epoch: int = 0,
    ) -> AbortedTransaction | None:
        """Apply a batch already in the log (recovery, followers, markers). For an ABORT marker
        returns the aborted transaction to put in the segment's transaction index."""
        if header.producer_id < 0:
            return None
        entry = self.copy_entry(header.producer_id)
        if control_type is None:
            self.update_entry(entry, header)
            self.commit_entry(entry)
            return None
        return self.complete_transaction(entry, header, control_type, coordinator_epoch)

    def complete_transaction(
        self,
        entry: ProducerStateEntry,
        header: BatchHeader,
        control_type: ControlRecordType,
        coordinator_epoch: int,
    ) -> AbortedTransaction | None:
        first_offset = entry.current_txn_first_offset
        if first_offset >= 0:
            self.ongoing.pop(first_offset, None)
        entry.current_txn_first_offset = -1
        if header.producer_epoch > entry.producer_epoch:
            # A marker that bumps the epoch (EndTxn v5, KIP-890) starts the producer's sequences
            # afresh: its next batch carries sequence 0 in the new epoch.
            entry.batches.clear()
        entry.producer_epoch = max(entry.producer_epoch, header.producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        self.producers[entry.producer_id] = entry
        if control_type is not ControlRecordType.ABORT or first_offset < 0:
            return None
        unstable = self.first_unstable_offset
        return AbortedTransaction(
            producer_id=entry.producer_id,
            first_offset=first_offset,
            last_offset=header.base_offset,
            last_stable_offset=header.base_offset + 1 if unstable is None else unstable,
        )

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `expiration_ms` (`producer.id.expiration.ms`): Kafka's
        rule, a producer with no open transaction whose last batch's timestamp is that old.
        Returns how many were removed."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def reset(self) -> None:
        self.producers.clear()
        self.ongoing.clear()

    # -- snapshots --

    def snapshot_bytes(self) -> bytes:
        body = bytearray(struct.pack(">i", len(self.producers)))
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                last.last_sequence if last else -1,
                last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
        count_and_entries = bytes(body)
        return struct.pack(">hI", 1, crc32c.crc32c(count_and_entries)) + count_and_entries

    def load_snapshot(self, data: bytes) -> None:
        """Replace the state by a snapshot; ValueError if it is corrupt."""
        if len(data) < _SNAPSHOT_HEADER.size:
            raise ValueError("truncated producer snapshot")
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        if version != 1 or crc32c.crc32c(data[6:]) != crc:
            raise ValueError("corrupt producer snapshot")
        if len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
            raise ValueError("producer snapshot length mismatch")
        self.reset()
        for values in _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEADER.size :]):
            producer_id, epoch, last_sequence, last_offset, delta, timestamp, coordinator, txn = (
                values
            )
            entry = ProducerStateEntry(
                producer_id=producer_id,
                producer_epoch=epoch,
                coordinator_epoch=coordinator,
                current_txn_first_offset=txn,
                last_timestamp=timestamp,
            )
            if last_sequence >= 0:
                entry.batches.append(
                    BatchMetadata(
                        first_sequence=max(0, last_sequence - delta),
                        last_sequence=last_sequence,
                        first_offset=last_offset - delta,
                        last_offset=last_offset,
                        timestamp=timestamp,
                    )
                )
            self.producers[producer_id] = entry
            if txn >= 0:
                self.ongoing[txn] = producer_id


def control_type_of(batch: bytes | memoryview) -> tuple[ControlRecordType, int]:
    """The marker type and coordinator epoch of a control batch."""
    records = decode_records(batch, max_size=1024)
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "control batch without a record")
    return parse_control_record(records[0])
