"""Share sessions' epochs and limits (moldau/share/sessions.py), and the batches a share fetch
read as acquisition sees them: markers and aborted transactions not deliverable
(moldau/share/log_batches.py)."""

from __future__ import annotations

import uuid

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import ControlRecordType, NewRecord, build_batch, build_control_batch
from moldau.share.log_batches import acquired_bytes, read_batches
from moldau.share.sessions import MAX_EPOCH, ShareSessionCache, next_epoch
from moldau.share.share_partition import AcquiredRecords, LogBatch

TOPIC = uuid.UUID(int=7)


def code_of(call: object) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def test_a_session_moves_epoch_by_epoch_and_tracks_its_partitions() -> None:
    cache = ShareSessionCache(max_sessions=10)
    connection = object()
    session = cache.open("g", "m", [(TOPIC, 0)], connection)
    assert session.epoch == 1
    assert code_of(lambda: cache.next("g", "m", 2)) == ErrorCode.invalid_share_session_epoch
    cache.next("g", "m", 1, added=[(TOPIC, 1)], forgotten=[(TOPIC, 0)])
    assert list(session.partitions) == [(TOPIC, 1)] and session.epoch == 2
    cache.acknowledged("g", "m", 2)
    assert session.epoch == 3
    assert code_of(lambda: cache.acknowledged("g", "m", 0)) == ErrorCode.invalid_share_session_epoch
    assert cache.acknowledged("g", "m", -1) is session and session.epoch == 3
    assert code_of(lambda: cache.next("g", "x", 1)) == ErrorCode.share_session_not_found
    assert next_epoch(MAX_EPOCH) == 1


def test_opening_again_replaces_and_the_cache_is_bounded() -> None:
    cache = ShareSessionCache(max_sessions=2)
    first = cache.open("g", "a", [], object())
    cache.open("g", "b", [], object())
    assert cache.open("g", "a", [], object()) is not first  # (a replacement takes no room)
    assert len(cache) == 2
    assert (
        code_of(lambda: cache.open("g", "c", [], object())) == ErrorCode.share_session_limit_reached
    )


def test_a_closed_connection_takes_its_sessions_along() -> None:
    cache = ShareSessionCache(max_sessions=10)
    connection = object()
    cache.open("g", "a", [], connection)
    cache.open("h", "b", [], connection)
    cache.open("g", "c", [], object())
    closed = cache.close_connection(connection)
    assert sorted(s.member_id for s in closed) == ["a", "b"]
    assert cache.get("g", "c") is not None and len(cache) == 1
    cache.close_group("g")
    assert len(cache) == 0


def _records(base: int, count: int, **kwargs: object) -> bytes:
    return bytes(
        build_batch(
            [NewRecord(value=b"v") for _ in range(count)],
            base_offset=base,
            **kwargs,  # type: ignore[arg-type]
        )
    )


def _marker(base: int, control: ControlRecordType, producer_id: int) -> bytes:
    return bytes(
        build_control_batch(control, producer_id=producer_id, producer_epoch=0, base_offset=base)
    )


def test_markers_and_aborted_transactions_are_not_deliverable() -> None:
    data = (
        _records(0, 2)
        + _records(2, 2, producer_id=5, producer_epoch=0, transactional=True)  # aborted
        + _records(4, 1, producer_id=6, producer_epoch=0, transactional=True)  # committed
        + _marker(5, ControlRecordType.ABORT, 5)
        + _marker(6, ControlRecordType.COMMIT, 6)
        + _records(7, 1, producer_id=5, producer_epoch=0, transactional=True)  # after its abort
    )
    committed = [read.batch for read in read_batches(data, aborted_transactions=[(5, 2)])]
    assert committed == [
        LogBatch(0, 1),
        LogBatch(2, 3, deliverable=False),
        LogBatch(4, 4),
        LogBatch(5, 5, deliverable=False),
        LogBatch(6, 6, deliverable=False),
        LogBatch(7, 7),
    ]
    uncommitted = [read.batch.deliverable for read in read_batches(data)]
    assert uncommitted == [True, True, True, False, False, True]


def test_only_the_batches_holding_acquired_records_are_sent() -> None:
    data = _records(0, 3) + _records(3, 3) + _records(6, 3)
    batches = read_batches(data)
    assert acquired_bytes(data, batches, []) == b""
    middle = acquired_bytes(data, batches, [AcquiredRecords(4, 4, 1)])
    assert middle == data[batches[1].start : batches[1].end]
    both = acquired_bytes(data, batches, [AcquiredRecords(2, 2, 2), AcquiredRecords(6, 8, 1)])
    assert both == data[batches[0].start : batches[0].end] + data[batches[2].start :]
