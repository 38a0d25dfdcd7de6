"""Kafka record batches (RecordBatch v2, `moldau.protocol.records`) encoded from Arrow columns:
the Spark sink's hot path, the write side of `arrow_records`.

A record (`records.py`) is varints around its key, value and headers:

    length | attributes 0 | timestampDelta 0 | offsetDelta | keyLength | key | valueLength | value
    | headerCount | per header: keyLength, key, valueLength, value

No Python runs per record. Every varint of every row is computed column-wise
(`arrow_varints.varint_words`: an int64 word holding the varint's bytes, and its width), a
record's neighbouring varints are packed into one word, and one `take` lays out the batches of
a chunk of rows: for each batch a 61-byte space for its header, then for each record its pieces
in order — words cut to their widths, its key, its value, its headers — all read from one binary
array holding the words and the columns. `seal` then writes each batch's header and CRC32C in
place (`records.seal_batch`), or compresses its records into a new batch: the bytes given to the
producer are Arrow's memory. Records get the batch's timestamp (timestamp delta 0), as a
producer stamps records it is given without one.

Pieces of a record (a word holds at most 8 bytes: records are at most MAX_RECORD_BYTES, so
lengths take at most four bytes, and offset deltas stay below MAX_BATCH_RECORDS, three):

    [length, 0, 0] [offsetDelta, keyLength] key [valueLength] value [headerCount] headers
    no key column:  [length, 0, 0] [offsetDelta, keyLength -1, valueLength] value ...
    no headers:     ... value [0]

Words are read as memory: this needs a little-endian machine (`LITTLE_ENDIAN`; the sink refuses
to start on another).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.protocol.batch_layout import HEADER_SIZE, MAGIC, TRANSACTIONAL_BIT
from moldau.protocol.compression import CompressionType, compress
from moldau.protocol.records import BatchHeader, batch_with_payload, seal_batch
from moldau.spark.arrow_varints import (
    ONE,
    ZERO,
    int64_scalar,
    interleave,
    repeated,
    varint_width,
    varint_words,
)

__all__ = [
    "LITTLE_ENDIAN",
    "MAX_BATCH_RECORDS",
    "MAX_RECORD_BYTES",
    "EncodedBatches",
    "RecordColumns",
    "encode_batches",
    "seal",
]

LITTLE_ENDIAN: Final = sys.byteorder == "little"
# The largest record the sink writes (its length varint then fits four bytes).
MAX_RECORD_BYTES: Final = (1 << 26) - 1
# Offset deltas stay below this (three varint bytes).
MAX_BATCH_RECORDS: Final = 1 << 20

_INT64: Final = pa.int64()
_BINARY: Final = pa.binary()
_EIGHT: Final = int64_scalar(8)
_TWO: Final = int64_scalar(2)
_FOUR: Final = int64_scalar(4)
_MINUS_ONE: Final = int64_scalar(-1)
_EMPTY: Final = pa.scalar(b"", _BINARY)


@dataclass(frozen=True, slots=True)
class _Varints:
    """A varint per row: its bytes as an int64 word, and its width."""

    words: pa.Array
    widths: pa.Array

    @classmethod
    def of(cls, values: pa.Array) -> _Varints:
        return cls(*varint_words(values))

    def take(self, order: pa.Array | None) -> _Varints:
        if order is None:
            return self
        return _Varints(pc.take(self.words, order), pc.take(self.widths, order))

    def then(self, following: _Varints) -> _Varints:
        """This varint followed by `following` in one word (their widths add up to 8 or less)."""
        shifted = pc.shift_left(following.words, pc.multiply(self.widths, _EIGHT))
        return _Varints(pc.bit_wise_or(self.words, shifted), pc.add(self.widths, following.widths))


@dataclass(frozen=True, slots=True)
class _Column:
    """A binary column placed in the records: record j's bytes are `values[order[j]]`."""

    values: pa.Array | pa.ChunkedArray
    order: pa.Array | None  # None: record j's are values[j]


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """What the records of a chunk of rows hold, whatever batch a row lands in (row order).
    `largest_size` bounds a record's size for planning batches; `encode_records` lays out
    the records."""

    count: int
    keys: pa.Array | pa.ChunkedArray | None  # binary, null keys empty; None: no row has a key
    key_lengths: _Varints | None  # -1 for a null key
    values: pa.Array | pa.ChunkedArray  # binary, null values empty
    value_lengths: _Varints  # -1 for a null value
    header_counts: _Varints | None  # None: no row has a header
    header_entries: pa.Array | None  # binary: each row's headers, encoded
    fixed_sizes: pa.Array  # int64: each record's bytes but its length and offset delta varints

    @classmethod
    def of(
        cls,
        *,
        values: pa.Array | pa.ChunkedArray,
        keys: pa.Array | pa.ChunkedArray | None = None,
        headers: pa.Array | None = None,
    ) -> RecordColumns:
        """The fields of rows with `values` and `keys` (binary or string, arrays or chunked
        arrays) and `headers` (list<struct<key: string, value: binary>>). Raises ValueError for
        a record over MAX_RECORD_BYTES or a null header or header key."""
        values, value_lengths = _bytes_and_lengths(values)
        value_varints = _Varints.of(value_lengths)
        # attributes and timestamp delta, then the value and its length
        fixed = pc.add(pc.max_element_wise(value_lengths, ZERO), value_varints.widths)
        fixed = pc.add(fixed, _TWO)
        key_varints = None
        if keys is not None and keys.null_count < len(keys):
            keys, key_lengths = _bytes_and_lengths(keys)
            key_varints = _Varints.of(key_lengths)
            fixed = pc.add(fixed, pc.max_element_wise(key_lengths, ZERO))
            fixed = pc.add(fixed, key_varints.widths)
        else:
            keys = None
            fixed = pc.add(fixed, ONE)  # keyLength -1
        header_counts, header_entries = _encode_headers(headers)
        if header_counts is None or header_entries is None:
            fixed = pc.add(fixed, ONE)  # headerCount 0
        else:
            fixed = pc.add(fixed, header_counts.widths)
            fixed = pc.add(fixed, pc.binary_length(header_entries).cast(_INT64))
        largest = (pc.max(fixed).as_py() or 0) if len(values) else 0
        if largest > MAX_RECORD_BYTES - 8:
            raise ValueError(
                f"a record of {largest} bytes: the sink writes records of at most "
                f"{MAX_RECORD_BYTES} bytes"
            )
        return cls(
            count=len(values),
            keys=keys,
            key_lengths=key_varints,
            values=values,
            value_lengths=value_varints,
            header_counts=header_counts,
            header_entries=header_entries,
            fixed_sizes=fixed,
        )

    def sizes(self, *, largest_offset_delta: int) -> pa.Array:
        """Each record's size in bytes or a little more: as if its offset delta were as wide as
        `largest_offset_delta`'s and its length varint as wide as the largest record's."""
        largest_fixed = (pc.max(self.fixed_sizes).as_py() or 0) if self.count else 0
        delta_width = varint_width(2 * largest_offset_delta)
        length_width = varint_width(2 * (largest_fixed + delta_width))
        return pc.add(self.fixed_sizes, int64_scalar(delta_width + length_width))


@dataclass(frozen=True, slots=True)
class EncodedBatches:
    """Batches one after another in `data`, each a 61-byte space for its header followed by its
    records: `batch(i)` is batch i's bytes."""

    data: pa.Buffer
    bounds: list[int]  # where each batch starts, and where the last one ends

    def batch(self, index: int) -> memoryview:
        return memoryview(self.data)[self.bounds[index] : self.bounds[index + 1]]


def encode_batches(
    columns: RecordColumns, *, order: pa.Array | None, batches: Sequence[tuple[int, int]]
) -> EncodedBatches:
    """The records of `columns` in the order `order` (row indices; None: as they are), cut into
    `batches`: consecutive ranges [start, end) of that order covering it, each a Kafka batch
    whose offset deltas start at 0. Headers are left to `seal`."""
    offset_delta = _offset_deltas(batches)
    length = _Varints.of(pc.add(_take(columns.fixed_sizes, order), offset_delta.widths))
    # the length, then attributes and timestamp delta (0 and 0)
    pieces: list[_Piece] = [_Varints(length.words, pc.add(length.widths, _TWO))]
    value_length = columns.value_lengths.take(order)
    if columns.keys is None or columns.key_lengths is None:
        null_key_then_value_length = _Varints(
            pc.bit_wise_or(pc.shift_left(value_length.words, _EIGHT), ONE),
            pc.add(value_length.widths, ONE),
        )
        pieces.append(offset_delta.then(null_key_then_value_length))
    else:
        pieces.append(offset_delta.then(columns.key_lengths.take(order)))
        pieces.append(_Column(columns.keys, order))
        pieces.append(value_length)
    pieces.append(_Column(columns.values, order))
    if columns.header_counts is not None and columns.header_entries is not None:
        pieces.append(columns.header_counts.take(order))
        pieces.append(_Column(columns.header_entries, order))
    else:
        pieces.append(_ZERO_BYTE)  # headerCount 0
    laid_out = _lay_out(columns.count, pieces, batches=batches)
    offsets, data = laid_out.buffers()[1:3]
    assert offsets is not None and data is not None and laid_out.offset == 0
    piece_offsets = memoryview(offsets).cast("i")
    # batch i's header space is element i * (1 + pieces per record) + (pieces of the records
    # before it)
    bounds = [
        piece_offsets[start * len(pieces) + index] for index, (start, _) in enumerate(batches)
    ]
    bounds.append(piece_offsets[len(laid_out)])
    return EncodedBatches(data, bounds)


def seal(
    batch: memoryview,
    *,
    records: int,
    timestamp: int,
    compression: CompressionType,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes | memoryview:
    """Batch `batch` of `encode_batches` (`records` records) made whole: its header written in
    place, or its records compressed with `compression` into a new batch. The same bytes as
    `records.build_batch` makes of those records with timestamp `timestamp`."""
    header = BatchHeader(
        base_offset=0,
        batch_length=0,
        partition_leader_epoch=-1,
        magic=MAGIC,
        crc=0,
        attributes=TRANSACTIONAL_BIT if transactional else 0,
        last_offset_delta=records - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=records,
    )
    if compression is CompressionType.NONE:
        seal_batch(batch, header)
        return batch
    compressed = compress(compression, batch[HEADER_SIZE:])
    return batch_with_payload(header, compressed, compression=compression)


# --- columns ---------------------------------------------------------------------------------


def _take(values: pa.Array, order: pa.Array | None) -> pa.Array:
    return values if order is None else pc.take(values, order)


def _bytes_and_lengths(
    column: pa.Array | pa.ChunkedArray,
) -> tuple[pa.Array | pa.ChunkedArray, pa.Array]:
    """A string or binary column as binary with null rows empty (chunks stay chunks: they are
    copied once, by the layout's `take`), and its lengths (-1: null) as one array."""
    if column.type != _BINARY:
        column = column.cast(_BINARY)
    lengths = pc.binary_length(column).cast(_INT64)
    if isinstance(lengths, pa.ChunkedArray):
        lengths = lengths.combine_chunks()
    if column.null_count:
        lengths = pc.fill_null(lengths, _MINUS_ONE)
        column = pc.fill_null(column, _EMPTY)
    return column, lengths


def _encode_headers(headers: pa.Array | None) -> tuple[_Varints | None, pa.Array | None]:
    """Per row: its header count's varint, and its headers encoded (keyLength, key,
    valueLength, value each) as one binary value. (None, None) when no row has a header."""
    if headers is None:
        return None, None
    entries = pc.list_flatten(headers)
    if len(entries) == 0:
        return None, None
    if entries.null_count:
        raise ValueError("the headers column holds a null header (a struct of key and value)")
    keys = pc.struct_field(entries, [0])
    if keys.null_count:
        raise ValueError("the headers column holds a header with a null key")
    keys, key_lengths = _bytes_and_lengths(keys)
    values, value_lengths = _bytes_and_lengths(pc.struct_field(entries, [1]))
    laid_out = _lay_out(
        len(entries),
        [
            _Varints.of(key_lengths),
            _Column(keys, None),
            _Varints.of(value_lengths),
            _Column(values, None),
        ],
    )
    # Row i's headers are entries [first[i], first[i] + counts[i]) of the flattened list: the
    # bytes from piece 4 * first[i] to piece 4 * (first[i] + counts[i]).
    counts = pc.fill_null(pc.list_value_length(headers), 0).cast(_INT64)
    first_entries = pc.subtract(pc.cumulative_sum(counts), counts)
    piece_offsets = pa.Array.from_buffers(
        pa.int32(), 4 * len(entries) + 1, [None, laid_out.buffers()[1]]
    )
    total = pa.array([len(entries)], type=_INT64)
    bounds = pc.take(piece_offsets, pc.multiply(pa.concat_arrays([first_entries, total]), _FOUR))
    per_row = pa.Array.from_buffers(
        _BINARY, len(counts), [None, bounds.buffers()[1], laid_out.buffers()[2]]
    )
    return _Varints.of(counts), per_row


# --- laying out pieces -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Constant:
    """The same bytes in every record: source element `index` of `_lay_out`."""

    index: int


_Piece = _Varints | _Column | _Constant
_ZERO_BYTE: Final = _Constant(0)
# The first sources of every `_lay_out`: constants, and the space for a batch header.
_CONSTANTS: Final = pa.array([b"\x00", bytes(HEADER_SIZE)], type=_BINARY)
_HEADER_SPACE_INDEX: Final = pa.array([1], type=_INT64)


def _lay_out(
    count: int, pieces: list[_Piece], *, batches: Sequence[tuple[int, int]] | None = None
) -> pa.Array:
    """A binary array of count * len(pieces) elements: for each record its pieces in order
    (words cut to their widths); with `batches`, a header space before each batch's records."""
    sources = [_CONSTANTS]
    shapes: list[_Shape] = []
    for piece in pieces:
        if isinstance(piece, _Varints):
            sources.append(_cut(piece, count))
            shapes.append(None)
        elif isinstance(piece, _Column):
            values = piece.values
            sources += values.chunks if isinstance(values, pa.ChunkedArray) else [values]
            shapes.append((len(values), piece.order))
        else:
            shapes.append(piece.index)
    return pa.concat_arrays(sources).take(_piece_order(count, shapes, batches))


# How `_piece_order` finds a piece among the sources: None for words cut by `_cut`, an int for
# a constant, else the rows of its column and the order they are read in (None: row order).
_Shape = tuple[int, pa.Array | None] | int | None

_plain_orders: dict[tuple[Any, ...], pa.Array] = {}


def _piece_order(
    count: int, shapes: list[_Shape], batches: Sequence[tuple[int, int]] | None
) -> pa.Array:
    """Indices into the sources of `_lay_out` (the constants, then each piece's) that read
    record by record, piece by piece, a header space before each batch. Kept when every column
    is read in row order: it then depends only on the count, the columns' lengths and the
    batches, which the chunks of a steady stream of rows share."""
    plain = all(not isinstance(shape, tuple) or shape[1] is None for shape in shapes)
    key = (
        count,
        tuple(_shape_key(shape) for shape in shapes),
        None if batches is None else tuple(batches),
    )
    if plain and key in _plain_orders:
        return _plain_orders[key]
    indices = []
    base = len(_CONSTANTS)
    for shape in shapes:
        if shape is None:
            indices.append(pc.add(_evens(count), int64_scalar(base)))
            base += 2 * count - 1
        elif isinstance(shape, int):
            indices.append(repeated(shape, count))
        else:
            rows, order = shape
            indices.append(pc.add(_arange(count) if order is None else order, int64_scalar(base)))
            base += rows
    laid_out = pa.concat_arrays(indices).take(_interleave_pattern(count, len(shapes)))
    if batches is not None:
        step = len(shapes)
        parts = []
        for start, end in batches:
            parts += [_HEADER_SPACE_INDEX, laid_out.slice(start * step, (end - start) * step)]
        laid_out = pa.concat_arrays(parts)
    if plain:
        if len(_plain_orders) >= 8:
            _plain_orders.clear()
        _plain_orders[key] = laid_out
    return laid_out


def _shape_key(shape: _Shape) -> int | tuple[int, int]:
    if shape is None:
        return -1
    if isinstance(shape, int):
        return (0, shape)
    return shape[0]


def _cut(varints: _Varints, count: int) -> pa.Array:
    """2 * count - 1 binary elements over the words' memory: element 2j is word j's first
    `widths[j]` bytes, the odd ones the bytes between."""
    words = varints.words
    if words.offset:
        words = pa.concat_arrays([words])
    starts = _word_starts(count)
    spans = interleave(starts, pc.add(starts, varints.widths))
    return pa.Array.from_buffers(_BINARY, 2 * count - 1, [None, spans, words.buffers()[1]])


def _offset_deltas(batches: Sequence[tuple[int, int]]) -> _Varints:
    """The varints of 0, 1, ... restarting at each batch, from cached varints of 0, 1, ..."""
    largest = max(end - start for start, end in batches)
    if largest > MAX_BATCH_RECORDS:
        raise ValueError(f"a batch of {largest} records (at most {MAX_BATCH_RECORDS})")
    cached = _offset_delta_cache[0]
    if len(cached.words) < largest:
        size = min(MAX_BATCH_RECORDS, max(largest, 65_536))
        cached = _Varints.of(_arange(size))
        _offset_delta_cache[0] = cached
    if len(batches) == 1:
        count = batches[0][1] - batches[0][0]
        return _Varints(cached.words.slice(0, count), cached.widths.slice(0, count))
    return _Varints(
        pa.concat_arrays([cached.words.slice(0, end - start) for start, end in batches]),
        pa.concat_arrays([cached.widths.slice(0, end - start) for start, end in batches]),
    )


_ranges: list[pa.Array] = [pa.array([], type=_INT64)]
_offset_delta_cache: list[_Varints] = [_Varints(_ranges[0], _ranges[0])]


def _arange(count: int) -> pa.Array:
    """0, 1, 2, ... (count values), sliced from a cached array grown on demand."""
    cached = _ranges[0]
    if len(cached) < count:
        cached = pa.array(range(max(count, 65_536)), type=_INT64)
        _ranges[0] = cached
    return cached.slice(0, count)


_word_start_cache: list[pa.Array] = []


def _word_starts(count: int) -> pa.Array:
    """0, 8, 16, ...: where each int64 word starts."""
    if not _word_start_cache or len(_word_start_cache[0]) < count:
        _word_start_cache[:] = [pc.multiply(_arange(max(count, 65_536)), _EIGHT)]
    return _word_start_cache[0].slice(0, count)


def _evens(count: int) -> pa.Array:
    return pc.multiply(_arange(count), _TWO)


def _interleave_pattern(count: int, width: int) -> pa.Array:
    """The indices that read `width` stacked columns of `count` rows row by row."""
    positions = _arange(count * width)
    rows = pc.divide(positions, int64_scalar(width))
    columns = pc.subtract(positions, pc.multiply(rows, int64_scalar(width)))
    return pc.add(pc.multiply(columns, int64_scalar(count)), rows)
