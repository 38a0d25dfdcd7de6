"""Decoding fetched batches: offsets before the fetch offset, control batches, aborted data."""

from __future__ import annotations

from moldau.client.fetcher import build_fetch_request, records_from_fetch
from moldau.protocol.records import ControlRecordType, NewRecord, build_batch, build_control_batch
from moldau.types import TopicPartition

TP = TopicPartition("t", 0)


def _batch(base_offset: int, values: list[bytes], **kwargs: object) -> bytes:
    return build_batch(
        [NewRecord(key=None, value=v, timestamp=1000 + i) for i, v in enumerate(values)],
        base_offset=base_offset,
        **kwargs,  # type: ignore[arg-type]
    )


def _values(fetched: object) -> list[tuple[int, bytes | None]]:
    return [(m.offset(), m.value()) for m in fetched.messages]  # type: ignore[attr-defined]


def test_records_before_the_fetch_offset_are_skipped() -> None:
    data = _batch(0, [b"a", b"b", b"c"]) + _batch(3, [b"d"])
    fetched = records_from_fetch(TP, data, fetch_offset=2)
    assert _values(fetched) == [(2, b"c"), (3, b"d")]
    assert fetched.next_offset == 4


def test_headers_keys_and_timestamps_survive() -> None:
    data = build_batch(
        [NewRecord(key=b"k", value=b"v", headers=(("h", b"1"), ("h", None)), timestamp=42)]
    )
    (message,) = records_from_fetch(TP, data, fetch_offset=0).messages
    assert (message.key(), message.value(), message.headers()) == (
        b"k",
        b"v",
        [("h", b"1"), ("h", None)],
    )
    assert message.timestamp() == (1, 42)


def test_control_batches_are_never_returned_but_move_the_position() -> None:
    data = _batch(0, [b"a"], producer_id=7, producer_epoch=0, transactional=True)
    data += build_control_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, base_offset=1
    )
    fetched = records_from_fetch(TP, data, fetch_offset=0, read_committed=True)
    assert _values(fetched) == [(0, b"a")]
    assert fetched.next_offset == 2


def test_read_committed_drops_aborted_transactions_only() -> None:
    aborted = _batch(0, [b"x", b"y"], producer_id=5, producer_epoch=0, transactional=True)
    plain = _batch(2, [b"plain"])
    marker = build_control_batch(
        ControlRecordType.ABORT, producer_id=5, producer_epoch=0, base_offset=3
    )
    later = _batch(4, [b"z"], producer_id=5, producer_epoch=0, transactional=True)
    data = aborted + plain + marker + later
    committed = records_from_fetch(
        TP, data, fetch_offset=0, aborted_transactions=[(5, 0)], read_committed=True
    )
    assert _values(committed) == [(2, b"plain"), (4, b"z")]
    uncommitted = records_from_fetch(TP, data, fetch_offset=0, aborted_transactions=[(5, 0)])
    assert _values(uncommitted) == [(0, b"x"), (1, b"y"), (2, b"plain"), (4, b"z")]
    assert committed.next_offset == uncommitted.next_offset == 5


def test_a_truncated_trailing_batch_is_left_for_the_next_fetch() -> None:
    data = _batch(0, [b"a"]) + _batch(1, [b"b"])[:-3]
    fetched = records_from_fetch(TP, data, fetch_offset=0)
    assert _values(fetched) == [(0, b"a")]
    assert fetched.next_offset == 1


def test_fetch_request_groups_partitions_by_topic() -> None:
    request = build_fetch_request(
        {TopicPartition("a", 0): 5, TopicPartition("a", 1): 7, TopicPartition("b", 0): 0},
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1000,
        partition_max_bytes=500,
        isolation_level=1,
    )
    topics = {
        t["topic"]: [(p["partition"], p["fetch_offset"]) for p in t["partitions"]]
        for t in request["topics"]
    }
    assert topics == {"a": [(0, 5), (1, 7)], "b": [(0, 0)]}
    assert request["isolation_level"] == 1
