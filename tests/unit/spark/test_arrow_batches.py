"""The sink's column-wise encoder makes the very bytes `build_batch` makes of the same records,
which the record decoder reads back: every codec, null and empty keys and values, headers (null
values, empty and null lists), varints of every width, many records, rows in a given order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, build_batch, iter_batches, validate_batches
from moldau.spark.arrow_batches import MAX_RECORD_BYTES, RecordColumns, encode_batches, seal
from moldau.spark.arrow_varints import MAX_WORD_VARINT, varint_words

TIMESTAMP = 1_700_000_000_000
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
Headers = Sequence[tuple[str, bytes | None]] | None


def _columns(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Headers] | None = None,
) -> RecordColumns:
    return RecordColumns.of(
        values=pa.array(values, pa.binary()),
        keys=None if keys is None else pa.array(keys, pa.binary()),
        headers=None
        if headers is None
        else pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            HEADERS,
        ),
    )


def _encode(
    columns: RecordColumns,
    batches: Sequence[tuple[int, int]],
    *,
    order: Sequence[int] | None = None,
    **fields: Any,
) -> list[bytes]:
    encoded = encode_batches(
        columns,
        order=None if order is None else pa.array(order, pa.int64()),
        batches=batches,
    )
    return [
        bytes(seal(encoded.batch(i), records=end - start, timestamp=TIMESTAMP, **fields))
        for i, (start, end) in enumerate(batches)
    ]


def _built(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Headers] | None,
    rows: Sequence[int],
    **fields: Any,
) -> bytes:
    records = [
        NewRecord(
            key=None if keys is None else keys[row],
            value=values[row],
            headers=tuple((headers[row] or ()) if headers is not None else ()),
            timestamp=TIMESTAMP,
        )
        for row in rows
    ]
    return build_batch(records, timestamp=TIMESTAMP, **fields)


def _cut(count: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, count)) for start in range(0, count, size)]


VALUES = [b"v0", None, b"", b"x" * 300, b"\x00\xff" * 5000]
KEYS = [b"k0", b"", None, b"k" * 200, b"key-4"]
ROW_HEADERS: list[Headers] = [[("h", b"1"), ("n", None)], None, [], [("", b"")], [("h", b"x" * 70)]]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_batches_are_the_bytes_build_batch_makes_of_the_same_records(
    codec: CompressionType,
) -> None:
    columns = _columns(VALUES, KEYS, ROW_HEADERS)
    fields = {"producer_id": 9, "producer_epoch": 2, "transactional": True}
    batches = _encode(columns, [(0, 2), (2, 5)], compression=codec, base_sequence=4, **fields)
    assert batches == [
        _built(VALUES, KEYS, ROW_HEADERS, [0, 1], compression=codec, base_sequence=4, **fields),
        _built(VALUES, KEYS, ROW_HEADERS, [2, 3, 4], compression=codec, base_sequence=4, **fields),
    ]
    for data in batches:
        validate_batches(data)


@pytest.mark.parametrize(
    ("keys", "headers"),
    [(None, None), (KEYS, None), (None, ROW_HEADERS), ([None] * 5, [None] * 5)],
    ids=["values only", "keys", "headers", "null keys and headers"],
)
def test_columns_a_chunk_lacks_are_left_out_of_its_records(
    keys: list[bytes | None] | None, headers: list[Headers] | None
) -> None:
    columns = _columns(VALUES, keys, headers)
    assert _encode(columns, [(0, 5)], compression=CompressionType.NONE) == [
        _built(VALUES, keys, headers, range(5))
    ]


def test_many_records_with_varints_of_every_width_read_back() -> None:
    count = 20_000
    sizes = {7: 8191, 13: 8192, 19: 70_000}  # lengths of one, two and three varint bytes
    values: list[bytes | None] = [
        bytes([i % 256]) * sizes.get(i, i % 70) if i % 11 else None for i in range(count)
    ]
    keys: list[bytes | None] = [b"key-%d" % i if i % 3 else None for i in range(count)]
    headers: list[Headers] = [[("i", b"%d" % i)] * (i % 3) for i in range(count)]
    batches = _cut(count, 9_000)  # offset deltas up to 8,999: three varint bytes
    encoded = _encode(_columns(values, keys, headers), batches, compression=CompressionType.NONE)
    read = [
        record for data in encoded for batch in iter_batches(data) for record in batch.records()
    ]
    assert [(r.offset, r.timestamp) for r in read[:2]] == [(0, TIMESTAMP), (1, TIMESTAMP)]
    assert [r.key for r in read] == keys
    assert [r.value for r in read] == values
    assert [list(r.headers) for r in read] == headers
    assert encoded[1] == _built(values, keys, headers, range(9_000, 18_000))


def test_rows_are_written_in_the_order_given() -> None:
    order = [4, 0, 3, 1, 2]
    columns = _columns(VALUES, KEYS, ROW_HEADERS)
    assert _encode(columns, [(0, 3), (3, 5)], order=order, compression=CompressionType.NONE) == [
        _built(VALUES, KEYS, ROW_HEADERS, [4, 0, 3]),
        _built(VALUES, KEYS, ROW_HEADERS, [1, 2]),
    ]


def test_string_and_chunked_columns_are_written_as_their_utf8_bytes() -> None:
    values = pa.chunked_array([pa.array(["é", None]), pa.array(["", "abc"])])
    keys = pa.chunked_array([pa.array(["k", "ü"]), pa.array([None, "z"])])
    columns = RecordColumns.of(values=values, keys=keys)
    expected = [b"\xc3\xa9", None, b"", b"abc"]
    assert _encode(columns, [(0, 4)], compression=CompressionType.NONE) == [
        _built(expected, [b"k", "ü".encode(), None, b"z"], None, range(4))
    ]


def test_sizes_bound_the_records_from_above() -> None:
    columns = _columns(VALUES, KEYS, ROW_HEADERS)
    (data,) = _encode(columns, [(0, 5)], compression=CompressionType.NONE)
    sizes = columns.sizes(largest_offset_delta=4).to_pylist()
    assert sum(sizes) >= len(data) - 61 >= sum(sizes) - 2 * 5


def test_a_record_over_the_limit_and_a_header_without_a_key_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        RecordColumns.of(values=pa.array([b"x" * (MAX_RECORD_BYTES + 1)], pa.large_binary()))
    with pytest.raises(ValueError, match="null key"):
        _columns([b"v"], headers=[[(None, b"1")]])  # type: ignore[list-item]


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


@pytest.mark.parametrize(
    "values",
    [
        [0, 1, 5, 63],
        [-1, -1],
        [-1, 0, 64, 8191, 8192, 1 << 20, MAX_WORD_VARINT, -MAX_WORD_VARINT - 1],
        [100, 101, 8000],
    ],
)
def test_varint_words_hold_each_value_s_zigzag_varint(values: list[int]) -> None:
    words, widths = varint_words(pa.array(values, pa.int64()))
    for value, word, width in zip(values, words.to_pylist(), widths.to_pylist(), strict=True):
        assert word.to_bytes(8, "little")[:width] == _varint(value)
        assert word >> (8 * width) == 0


def test_varints_wider_than_a_word_holds_are_refused() -> None:
    with pytest.raises(ValueError, match="bytes"):
        varint_words(pa.array([MAX_WORD_VARINT + 1], pa.int64()))
