"""The leader's view of its followers: caught-up times, the high watermark over the (maximal)
ISR, and the ISR changes it proposes."""

from __future__ import annotations

from moldau.replication.replica_tracker import IsrChange, ReplicaTracker

LAG_MS = 30_000


def _tracker(isr=(1, 2, 3)) -> ReplicaTracker:
    tracker = ReplicaTracker(local_id=1)
    tracker.reset(replicas=(1, 2, 3), isr=isr, now_ms=0, log_end_offset=0)
    return tracker


def test_the_high_watermark_is_the_smallest_end_offset_in_the_isr() -> None:
    tracker = _tracker()
    tracker.record_fetch(2, fetch_offset=7, leader_end_offset=10, now_ms=10)
    tracker.record_fetch(3, fetch_offset=4, leader_end_offset=10, now_ms=10)
    assert tracker.high_watermark(10) == 4
    tracker.record_fetch(3, fetch_offset=10, leader_end_offset=10, now_ms=20)
    assert tracker.high_watermark(10) == 7


def test_a_follower_out_of_the_isr_does_not_hold_the_high_watermark_back() -> None:
    tracker = _tracker(isr=(1, 2))
    tracker.record_fetch(2, fetch_offset=10, leader_end_offset=10, now_ms=10)
    tracker.record_fetch(3, fetch_offset=0, leader_end_offset=10, now_ms=10)
    assert tracker.high_watermark(10) == 10


def test_a_lagging_follower_is_proposed_for_removal_after_the_lag_time() -> None:
    tracker = _tracker()
    tracker.record_fetch(2, fetch_offset=10, leader_end_offset=10, now_ms=1_000)
    tracker.record_fetch(3, fetch_offset=2, leader_end_offset=10, now_ms=1_000)
    assert (
        tracker.proposed_change(
            now_ms=LAG_MS, high_watermark=2, epoch_start_offset=0, lag_max_ms=LAG_MS
        )
        is None
    )
    tracker.record_fetch(2, fetch_offset=10, leader_end_offset=10, now_ms=LAG_MS + 1)
    change = tracker.proposed_change(
        now_ms=LAG_MS + 1, high_watermark=2, epoch_start_offset=0, lag_max_ms=LAG_MS
    )
    assert change == IsrChange(new_isr=(1, 2), removed=(3,))


def test_a_fetch_reaching_the_previous_end_offset_counts_as_caught_up_at_that_fetch() -> None:
    tracker = _tracker()
    tracker.record_fetch(3, fetch_offset=5, leader_end_offset=10, now_ms=100)
    tracker.record_fetch(3, fetch_offset=10, leader_end_offset=20, now_ms=200)
    assert tracker.followers[3].last_caught_up_ms == 100


def test_a_caught_up_follower_is_proposed_back_into_the_isr() -> None:
    tracker = _tracker(isr=(1, 2))
    tracker.record_fetch(3, fetch_offset=4, leader_end_offset=10, now_ms=10)
    assert (
        tracker.proposed_change(
            now_ms=10, high_watermark=8, epoch_start_offset=0, lag_max_ms=LAG_MS
        )
        is None
    )
    tracker.record_fetch(3, fetch_offset=8, leader_end_offset=10, now_ms=20)
    # (it must also hold the start of the leader's epoch)
    assert (
        tracker.proposed_change(
            now_ms=20, high_watermark=8, epoch_start_offset=9, lag_max_ms=LAG_MS
        )
        is None
    )
    change = tracker.proposed_change(
        now_ms=20, high_watermark=8, epoch_start_offset=6, lag_max_ms=LAG_MS
    )
    assert change == IsrChange(new_isr=(1, 2, 3), added=(3,))


def test_while_an_expansion_is_pending_the_new_member_holds_the_high_watermark() -> None:
    tracker = _tracker(isr=(1, 2))
    tracker.record_fetch(2, fetch_offset=10, leader_end_offset=10, now_ms=10)
    tracker.record_fetch(3, fetch_offset=8, leader_end_offset=10, now_ms=10)
    tracker.pending = tracker.proposed_change(
        now_ms=10, high_watermark=8, epoch_start_offset=0, lag_max_ms=LAG_MS
    )
    assert tracker.pending is not None and tracker.pending.added == (3,)
    assert tracker.high_watermark(10) == 8  # it may be in the ISR a new leader comes from
    assert (
        tracker.proposed_change(
            now_ms=10, high_watermark=8, epoch_start_offset=0, lag_max_ms=LAG_MS
        )
        is None
    )  # one change at a time
    tracker.committed((1, 2, 3))
    assert tracker.pending is None and tracker.isr == (1, 2, 3)


def test_fetches_from_nodes_that_are_not_replicas_are_ignored() -> None:
    tracker = _tracker()
    assert tracker.record_fetch(9, fetch_offset=100, leader_end_offset=10, now_ms=1) is None


def test_the_low_watermark_waits_for_every_live_replica_to_drop_the_records() -> None:
    tracker = _tracker(isr=(1, 2))
    assert tracker.low_watermark(40) == 0  # followers not heard from yet
    tracker.record_fetch(2, fetch_offset=50, leader_end_offset=50, now_ms=10, log_start_offset=40)
    tracker.record_fetch(3, fetch_offset=20, leader_end_offset=50, now_ms=10, log_start_offset=0)
    assert tracker.low_watermark(40) == 0  # 3 is out of the ISR but alive: it still holds them
    assert tracker.low_watermark(40, alive={1, 2}) == 40  # ... unless its broker is gone
    tracker.record_fetch(3, fetch_offset=50, leader_end_offset=50, now_ms=20, log_start_offset=40)
    assert tracker.low_watermark(40) == 40
    tracker.record_fetch(3, fetch_offset=50, leader_end_offset=50, now_ms=30)  # no log start sent
    assert tracker.low_watermark(40) == 40
