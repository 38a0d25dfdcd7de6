"""Idempotent producers and transactions: sequences, duplicates, fencing, LSO, aborted index."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import ControlRecordType, build_control_batch
from moldau.storage.config import LogConfig
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.results import AppendOrigin
from moldau.storage.transaction_index import AbortedTransaction

from .helpers import batch, open_log, values_from


def idempotent(sequence: int, *values: bytes, producer_id: int = 42, epoch: int = 0, **kwargs):
    return batch(
        *values, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, **kwargs
    )


def marker(kind: ControlRecordType, producer_id: int = 42, epoch: int = 0) -> bytes:
    return build_control_batch(
        kind, producer_id=producer_id, producer_epoch=epoch, timestamp=1_700_000_000_000
    )


def test_in_sequence_batches_are_appended(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    assert log.append_as_leader(idempotent(0, b"a", b"b"), leader_epoch=0).first_offset == 0
    assert log.append_as_leader(idempotent(2, b"c"), leader_epoch=0).first_offset == 2


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_twice(
    filesystem, clock
) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"a", b"b"), leader_epoch=0)
    log.append_as_leader(batch(b"other"), leader_epoch=0)
    log.append_as_leader(idempotent(2, b"c"), leader_epoch=0)
    retry = log.append_as_leader(idempotent(0, b"a", b"b"), leader_epoch=0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 1)
    assert log.log_end_offset == 4
    assert [v for _, v in values_from(log)] == [b"a", b"b", b"other", b"c"]


def test_a_sequence_gap_is_out_of_order(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"a"), leader_epoch=0)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(idempotent(5, b"b"), leader_epoch=0)
    assert caught.value.code is ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 1


def test_an_older_epoch_is_fenced_and_a_new_epoch_restarts_at_zero(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"a", epoch=3), leader_epoch=0)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(idempotent(1, b"b", epoch=2), leader_epoch=0)
    assert caught.value.code is ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(idempotent(1, b"b", epoch=4), leader_epoch=0)
    assert caught.value.code is ErrorCode.out_of_order_sequence_number
    assert log.append_as_leader(idempotent(0, b"b", epoch=4), leader_epoch=0).first_offset == 1


def test_duplicates_are_detected_after_a_clean_restart(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"a"), leader_epoch=0)
    log.append_as_leader(idempotent(1, b"b"), leader_epoch=0)
    log.close()
    reopened = open_log(filesystem, clock, recovery_point=2, clean_shutdown=True)
    retry = reopened.append_as_leader(idempotent(1, b"b"), leader_epoch=0)
    assert retry.duplicate and retry.first_offset == 1
    with pytest.raises(KafkaError):
        reopened.append_as_leader(idempotent(3, b"c"), leader_epoch=0)


def test_producer_state_is_rebuilt_from_the_log_after_a_crash(filesystem, clock) -> None:
    log = open_log(filesystem, clock, LogConfig(segment_bytes=300))
    for sequence in range(10):
        log.append_as_leader(idempotent(sequence, b"v%d" % sequence), leader_epoch=0)
    log.flush()
    filesystem.crash()
    reopened = open_log(filesystem, clock, LogConfig(segment_bytes=300))
    assert reopened.producer_state.producers[42].last_sequence == 9
    assert reopened.append_as_leader(idempotent(10, b"next"), leader_epoch=0).first_offset == 10


def test_open_transaction_holds_the_last_stable_offset(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(batch(b"plain"), leader_epoch=0)
    log.append_as_leader(idempotent(0, b"t1", b"t2", transactional=True), leader_epoch=0)
    log.append_as_leader(batch(b"after"), leader_epoch=0)
    log.update_high_watermark(4)
    assert log.last_stable_offset == 1
    log.append_as_leader(
        marker(ControlRecordType.COMMIT), leader_epoch=0, origin=AppendOrigin.COORDINATOR
    )
    log.update_high_watermark(5)
    assert log.last_stable_offset == 5
    assert log.aborted_transactions(0, 5) == []


def test_aborted_transaction_is_indexed_and_survives_recovery(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"t1", transactional=True), leader_epoch=0)
    log.append_as_leader(idempotent(0, b"u1", producer_id=7, transactional=True), leader_epoch=0)
    log.append_as_leader(
        marker(ControlRecordType.ABORT), leader_epoch=0, origin=AppendOrigin.COORDINATOR
    )
    expected = [
        AbortedTransaction(producer_id=42, first_offset=0, last_offset=2, last_stable_offset=1)
    ]
    assert log.aborted_transactions(0, 3) == expected
    assert log.aborted_transactions(3, 10) == []
    log.update_high_watermark(3)
    assert log.last_stable_offset == 1  # producer 7 still open
    log.flush()
    filesystem.crash()
    recovered = open_log(filesystem, clock)
    assert recovered.aborted_transactions(0, 3) == expected
    assert recovered.producer_state.first_unstable_offset == 1


def test_snapshot_round_trip_and_corruption_is_detected() -> None:
    state = ProducerStateManager()
    from moldau.protocol.records import BatchHeader

    header = BatchHeader(10, 100, 0, 2, 0, 0x10, 2, 5, 6, 9, 1, 3, 3)
    state.apply_batch(header)
    data = state.snapshot_bytes()
    copy = ProducerStateManager()
    copy.load_snapshot(data)
    assert copy.producers[9].last_sequence == 5
    assert copy.producers[9].current_txn_first_offset == 10
    assert copy.first_unstable_offset == 10
    with pytest.raises(ValueError):
        copy.load_snapshot(data[:-1] + bytes([data[-1] ^ 1]))


def test_markers_from_an_old_epoch_or_coordinator_are_fenced(filesystem, clock) -> None:
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"t", epoch=2, transactional=True), leader_epoch=0)
    stale = build_control_batch(ControlRecordType.COMMIT, producer_id=42, producer_epoch=1)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(stale, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    assert caught.value.code is ErrorCode.invalid_producer_epoch
    commit = build_control_batch(
        ControlRecordType.COMMIT, producer_id=42, producer_epoch=2, coordinator_epoch=5
    )
    log.append_as_leader(commit, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    old_coordinator = build_control_batch(
        ControlRecordType.ABORT, producer_id=42, producer_epoch=2, coordinator_epoch=4
    )
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(old_coordinator, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    assert caught.value.code is ErrorCode.transaction_coordinator_fenced
    assert log.log_end_offset == 2


def test_a_marker_that_bumps_the_epoch_restarts_sequences_at_zero(filesystem, clock) -> None:
    """EndTxn v5 (KIP-890) ends each transaction with the next epoch; the producer's next batch
    carries sequence 0 in that epoch, not the continuation of the old one."""
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"t1", b"t2", transactional=True), leader_epoch=0)
    log.append_as_leader(
        marker(ControlRecordType.COMMIT, epoch=1), leader_epoch=0, origin=AppendOrigin.COORDINATOR
    )
    appended = log.append_as_leader(
        idempotent(0, b"t3", epoch=1, transactional=True), leader_epoch=0
    )
    assert appended.first_offset == 3 and not appended.duplicate
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(idempotent(5, b"gap", epoch=1), leader_epoch=0)
    assert caught.value.code is ErrorCode.out_of_order_sequence_number


def test_idle_producers_expire_but_not_those_with_an_open_transaction(filesystem, clock) -> None:
    """Kafka's rule: no open transaction and a last batch timestamp `producer.id.expiration.ms`
    old. A forgotten producer may write again (an unknown producer id starts anywhere)."""
    log = open_log(filesystem, clock)
    log.append_as_leader(idempotent(0, b"idle", producer_id=1), leader_epoch=0)
    log.append_as_leader(idempotent(0, b"open", producer_id=2, transactional=True), leader_epoch=0)
    log.append_as_leader(
        idempotent(0, b"recent", producer_id=3, base_timestamp=1_700_000_050_000), leader_epoch=0
    )
    now = 1_700_000_000_000 + 60_000  # the first two batches are a minute old
    assert log.remove_expired_producers(now - 1, 60_000) == 0
    assert log.remove_expired_producers(now, 60_000) == 1
    assert set(log.producer_state.producers) == {2, 3}
    log.update_high_watermark(3)
    assert log.last_stable_offset == 1  # the open transaction is still there
    assert log.append_as_leader(idempotent(7, b"back", producer_id=1), leader_epoch=0).first_offset


def test_a_log_opened_forgets_producers_already_expired() -> None:
    from moldau.clock import ManualClock
    from moldau.storage.log_manager import LogManager
    from moldau.storage.memory_filesystem import MemoryFileSystem
    from moldau.types import TopicPartition

    filesystem, clock = MemoryFileSystem(), ManualClock(1_700_000_000_000)
    tp = TopicPartition("t", 0)

    def manager() -> LogManager:
        return LogManager(["/d"], fs=filesystem, clock=clock, producer_id_expiration_ms=60_000)

    logs = manager()
    logs.startup()
    log = logs.get_or_create_log(tp)
    log.append_as_leader(idempotent(0, b"a", producer_id=1), leader_epoch=0)
    log.append_as_leader(
        idempotent(0, b"b", producer_id=2, base_timestamp=1_700_000_030_000), leader_epoch=0
    )
    log.roll()  # a producer snapshot holding both
    logs.shutdown()
    clock.advance(45_000)
    again = manager()
    again.startup()
    assert set(again.get_log(tp).producer_state.producers) == {1, 2}
    again.shutdown()
    clock.advance(15_000)  # producer 1's last batch is now a minute old
    third = manager()
    third.startup()
    assert set(third.get_log(tp).producer_state.producers) == {2}
    clock.advance(30_000)
    assert third.remove_expired_producers() == 1
    assert third.get_log(tp).producer_state.producers == {}
    third.shutdown()
