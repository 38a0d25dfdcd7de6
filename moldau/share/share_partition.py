"""The in-flight records of one share-partition: a share group's view of one topic-partition
(KIP-932; Kafka's SharePartition), without I/O.

Offsets below the share-partition start offset (SPSO, `start_offset`) are done with: every one
was acknowledged, archived or skipped. Offsets from the share-partition end offset (SPEO,
`end_offset`, exclusive here) on were never acquired. Every offset in between belongs to exactly
one `InFlightRange`, in one of four states (the numbers are Kafka's, as its share-group state
records store them):

    AVAILABLE(0) ──acquire: delivery count + 1──► ACQUIRED(1) ──accept──► ACKNOWLEDGED(2)
         ▲                                           │  ──reject, gap──► ARCHIVED(4)
         └── release or lock expiry, below the limit ┘
                 release or lock expiry at the limit ──► ARCHIVED(4)

A record is acquired by one member at a time, for `lock_deadline_ms` (monotonic); its delivery
count is how many times it was acquired. Released (by the member, by its leaving, or by the lock
running out) a record becomes AVAILABLE again, unless its delivery count has reached
`delivery_count_limit` (`group.share.delivery.count.limit`): then it is ARCHIVED, never to be
delivered again. Batches that are not deliverable (control batches, records of aborted
transactions under read_committed) and offsets the log does not have (compacted away) enter the
window ARCHIVED, with delivery count 0.

Invariants (`check_invariants`): the ranges are sorted, contiguous and cover exactly
[start_offset, end_offset); the first range is AVAILABLE or ACQUIRED (leading ACKNOWLEDGED and
ARCHIVED ranges are dropped as the start offset moves past them); an ACQUIRED range names its
member and lock deadline, no other does; fresh records are acquired only while the window
(end_offset - start_offset) is below `max_in_flight_records` (`group.share.partition.max.record.
locks`), so the state stays small.

`state_batches()` is the state as Kafka's share coordinator persists it (ShareSnapshotValue's
StateBatches): what a durable `__share_group_state` will write and `SharePartition.restore`
will read back.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch and ShareAcknowledge v1's acknowledge types."""

    GAP = 0  # an offset of an acquired range with no record (compacted, or a marker)
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


@dataclass(slots=True)
class InFlightRange:
    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # who holds it, while ACQUIRED
    lock_deadline_ms: int = 0  # when its acquisition lock runs out, while ACQUIRED

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def _same_as(self, other: InFlightRange) -> bool:
        return (
            self.state == other.state
            and self.delivery_count == other.delivery_count
            and self.member_id == other.member_id
            and self.lock_deadline_ms == other.lock_deadline_ms
        )


@dataclass(frozen=True, slots=True)
class LogBatch:
    """A batch read from the log, as acquisition sees it."""

    first_offset: int
    last_offset: int
    deliverable: bool = True  # False: a control batch, or an aborted transaction's records


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """Offsets acquired by one fetch (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """A member's acknowledgement of [first_offset, last_offset]: one type for every offset, or
    one type per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one state with one delivery count, as persisted."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


class SharePartition:
    def __init__(
        self, *, start_offset: int, delivery_count_limit: int, max_in_flight_records: int
    ) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self._ranges: list[InFlightRange] = []

    @classmethod
    def restore(
        cls,
        *,
        start_offset: int,
        batches: Iterable[StateBatch],
        delivery_count_limit: int,
        max_in_flight_records: int,
    ) -> SharePartition:
        """A share-partition rebuilt from persisted state: acquisitions do not survive (their
        records are AVAILABLE, their delivery counts kept), and offsets the batches leave out
        between the start offset and the last batch are AVAILABLE and never delivered."""
        partition = cls(
            start_offset=start_offset,
            delivery_count_limit=delivery_count_limit,
            max_in_flight_records=max_in_flight_records,
        )
        for batch in sorted(batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, partition.end_offset)
            if first > batch.last_offset:
                continue
            if first > partition.end_offset:
                partition._append(partition.end_offset, first - 1, RecordState.AVAILABLE, 0)
            state = RecordState.AVAILABLE if batch.state == RecordState.ACQUIRED else batch.state
            partition._append(first, batch.last_offset, state, batch.delivery_count)
        partition._settle()
        return partition

    # ---------------------------------------------------------------------------- reading

    def next_fetch_offset(self) -> int | None:
        """Where the next fetch should read: the first AVAILABLE offset, else the end offset
        while the window has room for fresh records; None when nothing can be acquired."""
        for in_flight in self._ranges:
            if in_flight.state == RecordState.AVAILABLE:
                return in_flight.first_offset
        return self.end_offset if self._has_room() else None

    def can_acquire(self, bound: int) -> bool:
        """Whether a fetch would find something to acquire: an AVAILABLE record, or fresh
        records below `bound` (the high watermark, or the last stable offset) with room."""
        offset = self.next_fetch_offset()
        return offset is not None and (offset < self.end_offset or self.end_offset < bound)

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self._ranges if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def acquired_by(self, member_id: str) -> int:
        """How many records `member_id` holds."""
        return sum(r.size for r in self._ranges if r.member_id == member_id)

    def state_batches(self) -> list[StateBatch]:
        """The in-flight state as persisted: one batch per range, in offset order."""
        return [
            StateBatch(r.first_offset, r.last_offset, r.state, r.delivery_count)
            for r in self._ranges
        ]

    def record_state(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        in_flight = self._ranges[self._index_of(offset)]
        return in_flight.state, in_flight.delivery_count

    # ---------------------------------------------------------------------------- changes

    def acquire(
        self,
        member_id: str,
        batches: Sequence[LogBatch],
        *,
        max_records: int,
        lock_deadline_ms: int,
    ) -> list[AcquiredRecords]:
        """Acquire for `member_id` what `batches` (read from the log, in offset order) hold that
        may be delivered: AVAILABLE in-flight records one by one, fresh records a whole batch at a
        time (so `max_records` may be exceeded by the rest of the last batch, as Kafka's
        "alignment of batch boundaries"), while the window has room."""
        taken: list[tuple[int, int, int]] = []  # (first, last, delivery count), in offset order
        count = 0
        for batch in batches:
            if count >= max_records:
                break
            first = max(batch.first_offset, self.start_offset)
            if first > batch.last_offset:
                continue
            if first < self.end_offset:
                last = min(batch.last_offset, self.end_offset - 1)
                count += self._acquire_in_flight(
                    member_id, first, last, max_records - count, lock_deadline_ms, taken
                )
                first = self.end_offset
                if first > batch.last_offset or count >= max_records:
                    continue
            if not self._has_room():
                break
            if first > self.end_offset:  # offsets the log does not have
                self._append(self.end_offset, first - 1, RecordState.ARCHIVED, 0)
            if batch.deliverable:
                self._append(
                    first, batch.last_offset, RecordState.ACQUIRED, 1, member_id, lock_deadline_ms
                )
                taken.append((first, batch.last_offset, 1))
                count += batch.last_offset - first + 1
            else:
                self._append(first, batch.last_offset, RecordState.ARCHIVED, 0)
        self._settle()
        return _merged(taken)

    def _acquire_in_flight(
        self,
        member_id: str,
        first: int,
        last: int,
        budget: int,
        lock_deadline_ms: int,
        taken: list[tuple[int, int, int]],
    ) -> int:
        index, end = self._slice(first, last)
        count = 0
        while index < end and count < budget:
            in_flight = self._ranges[index]
            if in_flight.state == RecordState.AVAILABLE:
                if in_flight.size > budget - count:  # take only what the budget allows
                    self._split(in_flight.first_offset + budget - count)
                    end += 1
                    in_flight = self._ranges[index]
                in_flight.state = RecordState.ACQUIRED
                in_flight.delivery_count += 1
                in_flight.member_id = member_id
                in_flight.lock_deadline_ms = lock_deadline_ms
                taken.append(
                    (in_flight.first_offset, in_flight.last_offset, in_flight.delivery_count)
                )
                count += in_flight.size
            index += 1
        return count

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> None:
        """Apply a member's acknowledgements of one partition, all or none: INVALID_REQUEST for
        malformed batches (unordered, overlapping, types not matching the range), and
        INVALID_RECORD_STATE when an offset is not one this member holds."""
        previous_last = -1
        for batch in batches:
            size = batch.last_offset - batch.first_offset + 1
            if batch.first_offset < 0 or size < 1 or batch.first_offset <= previous_last:
                raise KafkaError(ErrorCode.invalid_request, "invalid acknowledgement batch range")
            if len(batch.acknowledge_types) not in (1, size):
                raise KafkaError(
                    ErrorCode.invalid_request, "acknowledge types must be one, or one per offset"
                )
            for ack_type in batch.acknowledge_types:
                if ack_type not in AcknowledgeType._value2member_map_:
                    raise KafkaError(
                        ErrorCode.invalid_request, f"unknown acknowledge type {ack_type}"
                    )
            previous_last = batch.last_offset
        for batch in batches:
            if not self._held_by(member_id, batch.first_offset, batch.last_offset):
                raise KafkaError(
                    ErrorCode.invalid_record_state,
                    f"offsets {batch.first_offset}-{batch.last_offset} are not acquired by "
                    f"member {member_id}",
                )
        for batch in batches:
            types = batch.acknowledge_types
            if len(types) == 1:
                self._finish(batch.first_offset, batch.last_offset, AcknowledgeType(types[0]))
                continue
            run_first = batch.first_offset
            for position in range(1, len(types) + 1):
                if position == len(types) or types[position] != types[position - 1]:
                    run_last = batch.first_offset + position - 1
                    self._finish(run_first, run_last, AcknowledgeType(types[position - 1]))
                    run_first = run_last + 1
        self._settle()

    def release_member(self, member_id: str) -> int:
        """Release everything `member_id` holds (its share session closed); the count."""
        return self._release_where(lambda r: r.member_id == member_id)

    def release_all(self) -> int:
        """Release every acquisition (a new leader epoch: no lock carries over); the count."""
        return self._release_where(lambda r: r.state == RecordState.ACQUIRED)

    def expire_locks(self, now_ms: int) -> int:
        """Release the acquisitions whose lock ran out by `now_ms`; the count."""
        return self._release_where(
            lambda r: r.state == RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms
        )

    def move_start_to(self, offset: int) -> None:
        """The log starts at `offset` now (retention, DeleteRecords): what lies below it is
        gone, acquired or not."""
        if offset <= self.start_offset:
            return
        if offset >= self.end_offset:
            self._ranges.clear()
            self.start_offset = self.end_offset = offset
            return
        index = self._split(offset)
        del self._ranges[:index]
        self.start_offset = offset
        self._settle()

    # ---------------------------------------------------------------------------- internals

    def _has_room(self) -> bool:
        return self.end_offset - self.start_offset < self.max_in_flight_records

    def _append(
        self,
        first: int,
        last: int,
        state: RecordState,
        delivery_count: int,
        member_id: str | None = None,
        lock_deadline_ms: int = 0,
    ) -> None:
        assert first == self.end_offset <= last
        self._ranges.append(
            InFlightRange(first, last, state, delivery_count, member_id, lock_deadline_ms)
        )
        self.end_offset = last + 1

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._ranges, offset, key=lambda r: r.first_offset) - 1

    def _split(self, offset: int) -> int:
        """Make `offset` (within [start, end]) the first offset of a range; its index."""
        if offset >= self.end_offset:
            return len(self._ranges)
        index = self._index_of(offset)
        in_flight = self._ranges[index]
        if in_flight.first_offset == offset:
            return index
        tail = InFlightRange(
            offset,
            in_flight.last_offset,
            in_flight.state,
            in_flight.delivery_count,
            in_flight.member_id,
            in_flight.lock_deadline_ms,
        )
        in_flight.last_offset = offset - 1
        self._ranges.insert(index + 1, tail)
        return index + 1

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """Indexes [i, j) of the ranges that cover exactly [first, last] (split to fit)."""
        start = self._split(first)
        return start, self._split(last + 1)

    def _held_by(self, member_id: str, first: int, last: int) -> bool:
        if first < self.start_offset or last >= self.end_offset:
            return False
        index = self._index_of(first)
        while index < len(self._ranges) and self._ranges[index].first_offset <= last:
            in_flight = self._ranges[index]
            if in_flight.state != RecordState.ACQUIRED or in_flight.member_id != member_id:
                return False
            index += 1
        return True

    def _finish(self, first: int, last: int, ack_type: AcknowledgeType) -> None:
        index, end = self._slice(first, last)
        for in_flight in self._ranges[index:end]:
            if ack_type == AcknowledgeType.ACCEPT:
                self._set(in_flight, RecordState.ACKNOWLEDGED)
            elif ack_type == AcknowledgeType.RELEASE:
                self._release(in_flight)
            else:  # REJECT, GAP
                self._set(in_flight, RecordState.ARCHIVED)

    def _release(self, in_flight: InFlightRange) -> None:
        at_limit = in_flight.delivery_count >= self.delivery_count_limit
        self._set(in_flight, RecordState.ARCHIVED if at_limit else RecordState.AVAILABLE)

    @staticmethod
    def _set(in_flight: InFlightRange, state: RecordState) -> None:
        in_flight.state = state
        in_flight.member_id = None
        in_flight.lock_deadline_ms = 0

    def _release_where(self, selected: Callable[[InFlightRange], bool]) -> int:
        released = 0
        for in_flight in self._ranges:
            if in_flight.state == RecordState.ACQUIRED and selected(in_flight):
                self._release(in_flight)
                released += in_flight.size
        if released:
            self._settle()
        return released

    def _settle(self) -> None:
        """Merge neighbours alike, and move the start offset past what is done."""
        merged: list[InFlightRange] = []
        for in_flight in self._ranges:
            if merged and merged[-1]._same_as(in_flight):
                merged[-1].last_offset = in_flight.last_offset
            else:
                merged.append(in_flight)
        done = 0
        while done < len(merged) and merged[done].state in DONE:
            done += 1
        if done:
            self.start_offset = merged[done - 1].last_offset + 1
        self._ranges = merged[done:]

    def check_invariants(self) -> None:
        """Raise AssertionError if the window is not as the module docstring says."""
        assert self.start_offset <= self.end_offset
        expected = self.start_offset
        for index, in_flight in enumerate(self._ranges):
            assert in_flight.first_offset == expected, (in_flight, expected)
            assert in_flight.last_offset >= in_flight.first_offset, in_flight
            acquired = in_flight.state == RecordState.ACQUIRED
            assert (in_flight.member_id is not None) == acquired, in_flight
            assert acquired or in_flight.lock_deadline_ms == 0, in_flight
            assert in_flight.delivery_count >= 0, in_flight
            if index == 0:
                assert in_flight.state not in DONE, in_flight
            expected = in_flight.last_offset + 1
        assert expected == self.end_offset, (expected, self.end_offset)


def _merged(taken: list[tuple[int, int, int]]) -> list[AcquiredRecords]:
    """Adjacent acquired runs with the same delivery count as one."""
    result: list[AcquiredRecords] = []
    for first, last, delivery_count in taken:
        if (
            result
            and result[-1].last_offset + 1 == first
            and result[-1].delivery_count == delivery_count
        ):
            result[-1] = AcquiredRecords(result[-1].first_offset, last, delivery_count)
        else:
            result.append(AcquiredRecords(first, last, delivery_count))
    return result
