"""The bulk Arrow decoder yields exactly what the `Message` path yields, row for row.

Every case builds real RecordBatch v2 bytes and compares `fetch_to_arrow` with
`records_from_fetch` (the consumer's decoder): codecs, headers, null keys and values, varints of
every width, control batches, aborted transactions, fetch offsets inside a batch, range ends.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from moldau.client.fetcher import records_from_fetch
from moldau.protocol.compression import CompressionType
from moldau.protocol.errors import KafkaError
from moldau.protocol.records import (
    ControlRecordType,
    NewRecord,
    TimestampType,
    build_batch,
    build_control_batch,
)
from moldau.spark.arrow_records import fetch_to_arrow
from moldau.spark.schema import arrow_schema
from moldau.types import TopicPartition

TP = TopicPartition("events", 3)
BASE_TS = 1_700_000_000_000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _rows(
    records: bytes,
    *,
    fetch_offset: int = 0,
    end_offset: int = 1 << 62,
    include_headers: bool = True,
    **filters: Any,
) -> tuple[list[dict[str, Any]], int]:
    fetched = fetch_to_arrow(
        records,
        topic=TP.topic,
        partition=TP.partition,
        fetch_offset=fetch_offset,
        end_offset=end_offset,
        include_headers=include_headers,
        **filters,
    )
    if fetched.batch is None:
        return [], fetched.next_offset
    assert fetched.batch.schema == arrow_schema(include_headers)
    fetched.batch.validate(full=True)
    return fetched.batch.to_pylist(), fetched.next_offset


def _expected(
    records: bytes,
    *,
    fetch_offset: int = 0,
    end_offset: int = 1 << 62,
    include_headers: bool = True,
    **filters: Any,
) -> tuple[list[dict[str, Any]], int]:
    fetched = records_from_fetch(TP, records, fetch_offset=fetch_offset, **filters)
    rows = [
        {
            "key": m.key(),
            "value": m.value(),
            "topic": m.topic(),
            "partition": m.partition(),
            "offset": m.offset(),
            "timestamp": EPOCH + datetime.timedelta(milliseconds=m.timestamp()[1]),
            "timestampType": m.timestamp()[0] - 1,
            # Spark's Kafka source: null, not an empty list, for a record without headers
            "headers": [{"key": k, "value": v} for k, v in m.headers()] or None,
        }
        for m in fetched.messages
        if m.offset() < end_offset
    ]
    if not include_headers:
        for row in rows:
            del row["headers"]
    return rows, fetched.next_offset


def _assert_same(records: bytes, **arguments: Any) -> list[dict[str, Any]]:
    rows, next_offset = _rows(records, **arguments)
    assert (rows, next_offset) == _expected(records, **arguments)
    return rows


def _batch(base_offset: int, records: list[NewRecord], **kwargs: Any) -> bytes:
    return build_batch(records, base_offset=base_offset, timestamp=BASE_TS, **kwargs)


def _values(count: int, size: int = 100, *, start: int = 0) -> list[NewRecord]:
    return [
        NewRecord(value=bytes([i % 251]) * size, timestamp=BASE_TS + i)
        for i in range(start, start + count)
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_codec_decodes_like_the_message_path(codec: CompressionType) -> None:
    records = [
        NewRecord(
            key=f"k{i}".encode(), value=f"value {i}".encode() * (i % 7), timestamp=BASE_TS - i
        )
        for i in range(300)
    ]
    data = _batch(0, records[:200], compression=codec) + _batch(200, records[200:])
    rows = _assert_same(data)
    assert len(rows) == 300


def test_null_and_empty_keys_values_and_headers() -> None:
    records = [
        NewRecord(key=None, value=b"v0"),
        NewRecord(key=b"", value=None, headers=(("a", b"1"), ("b", None))),
        NewRecord(key=b"k2", value=b"", headers=(("", b""),)),
        NewRecord(key=None, value=None, headers=(("\u00e9t\u00e9", b"\x00\xff"),)),
    ]
    rows = _assert_same(_batch(10, records, compression=CompressionType.ZSTD), fetch_offset=10)
    assert [(r["key"], r["value"]) for r in rows] == [
        (None, b"v0"),
        (b"", None),
        (b"k2", b""),
        (None, None),
    ]
    assert rows[1]["headers"] == [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert rows[0]["headers"] is None  # no headers: null, as in Spark's Kafka source


def test_nulls_and_headers_across_compressed_and_plain_batches() -> None:
    def records(start: int) -> list[NewRecord]:
        return [
            NewRecord(
                key=None if i % 3 == 0 else f"k{i}".encode(),
                value=None if i % 5 == 0 else f"v{i}".encode(),
                headers=(("h", None if i % 2 else b"x"),) * (i % 3),
            )
            for i in range(start, start + 40)
        ]

    data = (
        _batch(0, records(0))
        + _batch(40, records(40), compression=CompressionType.LZ4)
        + _batch(80, records(80))
    )
    rows = _assert_same(data, fetch_offset=5, end_offset=117)
    assert len(rows) == 112


def test_all_null_keys_and_no_headers_column() -> None:
    rows, _ = _rows(_batch(0, _values(50)), include_headers=False)
    assert [r["key"] for r in rows] == [None] * 50
    assert "headers" not in rows[0]
    assert [r["offset"] for r in rows] == list(range(50))


def test_long_varints_in_lengths_deltas_and_timestamps() -> None:
    # values over 8 KB and offset deltas over 8191 need three-byte varints; timestamp deltas of
    # days need five
    records = [
        NewRecord(value=b"x" * 70_000, timestamp=BASE_TS),
        NewRecord(key=b"k" * 9000, value=b"y", timestamp=BASE_TS + 5 * 86_400_000),
        NewRecord(value=b"z", timestamp=BASE_TS - 86_400_000, offset_delta=20_000),
    ]
    rows = _assert_same(_batch(1 << 40, records))
    assert [r["offset"] for r in rows] == [1 << 40, (1 << 40) + 1, (1 << 40) + 20_000]


def test_many_records_across_many_batches() -> None:
    data = b"".join(_batch(b * 10_000, _values(10_000, start=b * 10_000)) for b in range(3))
    rows = _assert_same(data, include_headers=False)
    assert len(rows) == 30_000


def test_fetch_offset_inside_a_batch_and_range_end_inside_another() -> None:
    data = _batch(0, _values(10)) + _batch(10, _values(10, start=10), compression=1)
    rows = _assert_same(data, fetch_offset=4, end_offset=13)
    assert [r["offset"] for r in rows] == list(range(4, 13))


def test_batches_at_or_past_the_range_end_are_not_returned() -> None:
    data = _batch(0, _values(5)) + _batch(5, _values(5, start=5))
    rows, next_offset = _rows(data, end_offset=5)
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4]
    assert next_offset == 10


def test_log_append_time_batches_carry_the_broker_time() -> None:
    data = _batch(0, _values(3), timestamp_type=TimestampType.LOG_APPEND_TIME)
    data = data[:35] + (BASE_TS + 999).to_bytes(8, "big") + data[43:]  # maxTimestamp
    rows, _ = _rows(data)
    assert {r["timestampType"] for r in rows} == {1}
    assert {r["timestamp"] for r in rows} == {
        EPOCH + datetime.timedelta(milliseconds=BASE_TS + 999)
    }
    assert _expected(data)[0] == rows


def test_control_batches_yield_no_rows_but_move_the_next_offset() -> None:
    data = _batch(0, _values(2), producer_id=7, producer_epoch=0, transactional=True)
    data += build_control_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, base_offset=2
    )
    rows = _assert_same(data, read_committed=True)
    assert len(rows) == 2
    only_marker = data[len(_batch(0, _values(2), producer_id=7, transactional=True)) :]
    assert _rows(only_marker, fetch_offset=2) == ([], 3)


def test_read_committed_skips_aborted_transactions_and_read_uncommitted_keeps_them() -> None:
    transactional = {"producer_id": 5, "producer_epoch": 0, "transactional": True}
    data = (
        _batch(0, _values(2), **transactional)
        + _batch(2, _values(1, start=2))
        + build_control_batch(
            ControlRecordType.ABORT, producer_id=5, producer_epoch=0, base_offset=3
        )
        + _batch(4, _values(1, start=4), **transactional)
    )
    aborted = [(5, 0)]
    committed = _assert_same(data, aborted_transactions=aborted, read_committed=True)
    assert [r["offset"] for r in committed] == [2, 4]
    uncommitted = _assert_same(data, aborted_transactions=aborted, read_committed=False)
    assert [r["offset"] for r in uncommitted] == [0, 1, 2, 4]


def test_empty_and_partial_responses() -> None:
    assert _rows(b"", fetch_offset=7) == ([], 7)
    whole = _batch(0, _values(3))
    partial = whole + _batch(3, _values(3))[:-10]  # a fetch may end inside a batch
    assert _assert_same(partial) == _rows(whole)[0]


def test_a_record_count_larger_than_the_records_is_corrupt() -> None:
    data = bytearray(_batch(0, _values(3)))
    data[57:61] = (4).to_bytes(4, "big")
    with pytest.raises(KafkaError):
        fetch_to_arrow(
            bytes(data) + _batch(3, _values(3)),
            topic="t",
            partition=0,
            fetch_offset=0,
            end_offset=9,
        )
