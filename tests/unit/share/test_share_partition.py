"""The share-partition state machine: acquisition, acknowledgement, lock expiry, the delivery
limit and the start offset moving over what is done (moldau/share/share_partition.py)."""

from __future__ import annotations

import pytest

from moldau.clock import ManualClock, monotonic_ms
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    LogBatch,
    RecordState,
    SharePartition,
    StateBatch,
)

LOCK_MS = 30_000
ACCEPT, RELEASE, REJECT, GAP = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
)


def partition(start: int = 0, *, limit: int = 5, window: int = 2000) -> SharePartition:
    return SharePartition(
        start_offset=start, delivery_count_limit=limit, max_in_flight_records=window
    )


def batches(*spans: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last) for first, last in spans]


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


class Clocked:
    """A share-partition and a manual clock for its locks."""

    def __init__(self, **settings: int) -> None:
        self.clock = ManualClock()
        self.partition = partition(**settings)

    def acquire(self, member: str, *spans: tuple[int, int], max_records: int = 500) -> list:
        acquired = self.partition.acquire(
            member,
            batches(*spans),
            max_records=max_records,
            lock_deadline_ms=monotonic_ms(self.clock) + LOCK_MS,
        )
        self.partition.check_invariants()
        return acquired

    def expire(self, after_ms: int) -> int:
        self.clock.advance(after_ms)
        released = self.partition.expire_locks(monotonic_ms(self.clock))
        self.partition.check_invariants()
        return released


def test_fresh_batches_are_acquired_whole_with_delivery_count_one() -> None:
    share = Clocked()
    acquired = share.acquire("a", (0, 4), (5, 9))
    assert acquired == [AcquiredRecords(0, 9, 1)]
    assert (share.partition.start_offset, share.partition.end_offset) == (0, 10)
    assert share.partition.record_state(7) == (RecordState.ACQUIRED, 1)
    assert share.partition.next_fetch_offset() == 10


def test_max_records_is_exceeded_only_to_the_end_of_a_batch() -> None:
    share = Clocked()
    assert share.acquire("a", (0, 4), (5, 9), max_records=3) == [AcquiredRecords(0, 4, 1)]
    assert share.partition.end_offset == 5  # the second batch stays fresh


def test_what_another_member_holds_is_not_acquired_again() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    assert share.acquire("b", (0, 9), (10, 14)) == [AcquiredRecords(10, 14, 1)]
    assert share.partition.acquired_by("a") == 10
    assert share.partition.acquired_by("b") == 5


def test_lock_expiry_makes_records_available_and_the_next_acquisition_counts_two() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    assert share.expire(LOCK_MS - 1) == 0
    assert share.partition.next_lock_deadline() == monotonic_ms(share.clock) + 1
    assert share.expire(1) == 10
    assert share.partition.record_state(3) == (RecordState.AVAILABLE, 1)
    assert share.partition.next_fetch_offset() == 0
    assert share.acquire("b", (0, 9)) == [AcquiredRecords(0, 9, 2)]
    with pytest.raises(KafkaError) as refused:  # a's lock is gone: its late ack is refused
        share.partition.acknowledge("a", [ack(0, 9, ACCEPT)])
    assert refused.value.code == ErrorCode.invalid_record_state


def test_only_the_expired_locks_run_out() -> None:
    share = Clocked()
    share.acquire("a", (0, 4))
    share.clock.advance(10_000)
    share.acquire("b", (5, 9))
    assert share.expire(LOCK_MS - 10_000) == 5
    assert share.partition.record_state(0) == (RecordState.AVAILABLE, 1)
    assert share.partition.record_state(5) == (RecordState.ACQUIRED, 1)


def test_release_keeps_the_delivery_count_and_redelivers() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    share.partition.acknowledge("a", [ack(0, 4, ACCEPT), ack(5, 9, RELEASE)])
    assert share.partition.start_offset == 5
    assert share.partition.record_state(5) == (RecordState.AVAILABLE, 1)
    assert share.partition.next_fetch_offset() == 5
    assert share.acquire("b", (0, 9), (10, 11)) == [
        AcquiredRecords(5, 9, 2),
        AcquiredRecords(10, 11, 1),
    ]


def test_a_rejected_record_is_archived_and_never_delivered_again() -> None:
    share = Clocked()
    share.acquire("a", (0, 2))
    share.partition.acknowledge("a", [ack(0, 2, ACCEPT, REJECT, ACCEPT)])
    assert (share.partition.start_offset, share.partition.end_offset) == (3, 3)
    share.acquire("a", (3, 4))
    assert share.acquire("b", (0, 2)) == []  # below the start offset


def test_a_rejected_record_in_the_middle_holds_nothing_back() -> None:
    share = Clocked()
    share.acquire("a", (0, 2))
    share.partition.acknowledge("a", [ack(1, 1, REJECT)])
    assert share.partition.start_offset == 0  # 0 is still acquired
    assert share.partition.record_state(1) == (RecordState.ARCHIVED, 1)
    share.partition.acknowledge("a", [ack(0, 0, ACCEPT), ack(2, 2, ACCEPT)])
    assert share.partition.start_offset == 3


@pytest.mark.parametrize("by_expiry", [False, True])
def test_a_record_at_the_delivery_limit_is_archived(by_expiry: bool) -> None:
    share = Clocked(limit=3)
    for delivery in (1, 2, 3):
        assert share.acquire("a", (0, 0)) == [AcquiredRecords(0, 0, delivery)]
        if by_expiry:
            share.expire(LOCK_MS)
        else:
            share.partition.acknowledge("a", [ack(0, 0, RELEASE)])
    assert share.partition.start_offset == 1  # archived at the third release
    assert share.acquire("a", (0, 0)) == []


def test_the_start_offset_moves_over_acknowledged_and_archived_ranges_only() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    share.partition.acknowledge("a", [ack(2, 5, ACCEPT), ack(6, 7, REJECT)])
    assert share.partition.start_offset == 0
    share.partition.acknowledge("a", [ack(0, 1, ACCEPT)])
    assert share.partition.start_offset == 8
    assert share.partition.state_batches() == [StateBatch(8, 9, RecordState.ACQUIRED, 1)]
    share.partition.acknowledge("a", [ack(8, 9, ACCEPT)])
    assert (share.partition.start_offset, share.partition.end_offset) == (10, 10)
    assert share.partition.state_batches() == []


def test_gap_acknowledgements_archive_offsets_without_records() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))  # a compacted batch: records at 0, 5 and 9 only
    share.partition.acknowledge("a", [ack(0, 9, ACCEPT, *[GAP] * 4, ACCEPT, *[GAP] * 3, ACCEPT)])
    assert share.partition.start_offset == 10


def test_acknowledgements_are_all_or_nothing() -> None:
    share = Clocked()
    share.acquire("a", (0, 4))
    share.acquire("b", (5, 9))
    with pytest.raises(KafkaError) as refused:
        share.partition.acknowledge("a", [ack(0, 4, ACCEPT), ack(5, 5, ACCEPT)])
    assert refused.value.code == ErrorCode.invalid_record_state
    assert share.partition.record_state(0) == (RecordState.ACQUIRED, 1)
    with pytest.raises(KafkaError) as outside:
        share.partition.acknowledge("a", [ack(8, 12, ACCEPT)])
    assert outside.value.code == ErrorCode.invalid_record_state


@pytest.mark.parametrize(
    "batch",
    [
        ack(3, 2, ACCEPT),  # empty range
        ack(0, 2, ACCEPT, ACCEPT),  # two types for three offsets
        ack(0, 0, 7),  # no such type
        AcknowledgementBatch(-1, 0, (1,)),
    ],
)
def test_malformed_acknowledgements_are_invalid_requests(batch: AcknowledgementBatch) -> None:
    share = Clocked()
    share.acquire("a", (0, 4))
    with pytest.raises(KafkaError) as refused:
        share.partition.acknowledge("a", [batch])
    assert refused.value.code == ErrorCode.invalid_request


def test_overlapping_or_unordered_batches_are_invalid_requests() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    for batches_ in (
        [ack(0, 4, ACCEPT), ack(4, 6, ACCEPT)],
        [ack(5, 6, ACCEPT), ack(0, 1, ACCEPT)],
    ):
        with pytest.raises(KafkaError) as refused:
            share.partition.acknowledge("a", batches_)
        assert refused.value.code == ErrorCode.invalid_request


def test_the_window_bounds_fresh_acquisitions_not_redeliveries() -> None:
    share = Clocked(window=10)
    assert share.acquire("a", (0, 7), (8, 15)) == [AcquiredRecords(0, 15, 1)]  # a whole batch
    assert share.partition.next_fetch_offset() is None  # the window is full
    assert not share.partition.can_acquire(bound=100)
    assert share.acquire("b", (16, 20)) == []
    share.partition.acknowledge("a", [ack(3, 3, RELEASE)])
    assert share.partition.next_fetch_offset() == 3
    assert share.acquire("b", (0, 7), (16, 20)) == [AcquiredRecords(3, 3, 2)]
    share.partition.acknowledge("a", [ack(0, 2, ACCEPT), ack(4, 15, ACCEPT)])
    assert share.partition.start_offset == 3  # b holds 3: 13 in flight, still no room
    assert share.acquire("b", (16, 20)) == []
    share.partition.acknowledge("b", [ack(3, 3, ACCEPT)])
    assert share.acquire("b", (16, 20)) == [AcquiredRecords(16, 20, 1)]


def test_batches_that_cannot_be_delivered_enter_archived() -> None:
    share = Clocked()
    acquired = share.partition.acquire(
        "a",
        [LogBatch(0, 4), LogBatch(5, 5, deliverable=False), LogBatch(6, 9)],
        max_records=500,
        lock_deadline_ms=LOCK_MS,
    )
    assert acquired == [AcquiredRecords(0, 4, 1), AcquiredRecords(6, 9, 1)]
    assert share.partition.record_state(5) == (RecordState.ARCHIVED, 0)
    share.partition.acknowledge("a", [ack(0, 4, ACCEPT)])
    assert share.partition.start_offset == 6


def test_offsets_missing_from_the_log_are_archived() -> None:
    share = Clocked()
    assert share.acquire("a", (0, 1), (5, 6)) == [
        AcquiredRecords(0, 1, 1),
        AcquiredRecords(5, 6, 1),
    ]
    assert share.partition.record_state(3) == (RecordState.ARCHIVED, 0)


def test_a_start_inside_a_batch_acquires_only_from_it() -> None:
    share = Clocked()
    share.partition = partition(start=3)
    assert share.acquire("a", (0, 9)) == [AcquiredRecords(3, 9, 1)]


def test_a_member_leaving_releases_only_what_it_holds() -> None:
    share = Clocked()
    share.acquire("a", (0, 4))
    share.acquire("b", (5, 9))
    assert share.partition.release_member("a") == 5
    assert share.partition.record_state(0) == (RecordState.AVAILABLE, 1)
    assert share.partition.record_state(5) == (RecordState.ACQUIRED, 1)
    assert share.partition.release_all() == 5
    assert share.partition.next_lock_deadline() is None


def test_a_log_start_moving_past_the_window_drops_what_lies_below() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    share.partition.move_start_to(4)
    share.partition.check_invariants()
    assert share.partition.start_offset == 4
    assert share.partition.record_state(3) is None
    share.partition.move_start_to(20)
    share.partition.check_invariants()
    assert (share.partition.start_offset, share.partition.end_offset) == (20, 20)


def test_restoring_state_batches_releases_acquisitions_and_keeps_counts() -> None:
    share = Clocked()
    share.acquire("a", (0, 9))
    share.partition.acknowledge("a", [ack(0, 1, ACCEPT), ack(3, 3, REJECT), ack(4, 5, RELEASE)])
    restored = SharePartition.restore(
        start_offset=share.partition.start_offset,
        batches=share.partition.state_batches(),
        delivery_count_limit=5,
        max_in_flight_records=2000,
    )
    restored.check_invariants()
    assert (restored.start_offset, restored.end_offset) == (2, 10)
    assert restored.record_state(2) == (RecordState.AVAILABLE, 1)
    assert restored.record_state(3) == (RecordState.ARCHIVED, 1)
    assert restored.record_state(6) == (RecordState.AVAILABLE, 1)
    assert restored.next_lock_deadline() is None
