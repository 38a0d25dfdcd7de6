"""Zig-zag varints (Kafka's record fields) read at many positions at once with Arrow compute,
and written for many values at once.

Records are varint-framed, so only finding where each record starts needs a Python loop. Given
those starts, each field of every record is read column-wise: `take` of the bytes at the field's
positions, then masks and shifts in C. Varints of up to three bytes (values within ±1,048,575:
every length under 1 MB, offset deltas, timestamp deltas under 17 minutes) are read here; wider
ones make `read_varints` return None and the caller decodes that data record by record.

Writing (`varint_words`): each value's varint as an int64 whose little-endian bytes are the
varint's bytes, and its width; the sink's encoder lays those words out in memory and cuts the
varints from them (`arrow_batches`).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "MAX_WORD_VARINT",
    "ONE",
    "ZERO",
    "bytes_of",
    "decode_runs",
    "int64_scalar",
    "interleave",
    "read_varints",
    "repeated",
    "row_numbers",
    "varint_width",
    "varint_words",
]

_INT64: Final = pa.int64()


def int64_scalar(value: int) -> pa.Scalar:
    return pa.scalar(value, _INT64)


# Compute functions given a Python int convert it on every call, and that conversion looks for
# numpy each time (an import attempt, costly when numpy is absent): scalars are made once.
ONE: Final = int64_scalar(1)
_TWO: Final = int64_scalar(2)
ZERO: Final = int64_scalar(0)
_SEVEN: Final = int64_scalar(7)
_FOURTEEN: Final = int64_scalar(14)
_THIRTY_TWO: Final = int64_scalar(32)
_LOW_BITS: Final = int64_scalar(127)
_HIGH_BIT: Final = int64_scalar(128)
# A right shift giving the sign of an int64 (-1 or 0): Arrow returns a signed value shifted by
# 63 unchanged (63 is out of its range), so by 62, which is enough below 2**62.
_SIGN_SHIFT: Final = int64_scalar(62)
# `varint_words` writes varints of up to four bytes: zig-zag values under 2**28, so every value
# within ±MAX_WORD_VARINT (lengths up to 128 MiB, offset deltas).
MAX_WORD_VARINT: Final = (1 << 27) - 1
_WORD_BYTES: Final = 4
# Per byte k > 0 of a varint: where its 7 payload bits are (the value shifted left by k, masked)
# and the zig-zag value from which the varint needs that byte.
_BYTE_SHIFTS: Final = [int64_scalar(k) for k in range(_WORD_BYTES)]
_BYTE_MASKS: Final = [int64_scalar(0x7F << (8 * k)) for k in range(_WORD_BYTES)]
_BYTE_NEEDED_FROM: Final = [1 << (7 * k) for k in range(_WORD_BYTES)]
_BYTE_THRESHOLDS: Final = [int64_scalar(v) for v in _BYTE_NEEDED_FROM]
# The continuation bits (0x80 in every byte but the last) of a varint, by its width.
_CONTINUATIONS: Final = pa.array([0, 0, 0x80, 0x8080, 0x808080], type=_INT64)
_CONTINUATION_SCALARS: Final = [int64_scalar(bits) for bits in _CONTINUATIONS.to_pylist()]


def bytes_of(data: bytes) -> pa.Array:
    """`data` as a uint8 array, without copying."""
    return pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])


def read_varints(data: pa.Array, positions: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """The varint at each position of `data` (uint8) and the position after it, as int64 arrays;
    None if one is longer than three bytes. Positions are clamped to the data, so a malformed
    record reads garbage rather than failing here: callers check where fields end."""
    last = len(data) - 1
    first_byte = _byte_at(data, positions, last)
    second_byte = _byte_at(data, pc.add(positions, ONE), last)
    third_byte = _byte_at(data, pc.add(positions, _TWO), last)
    two_or_more = pc.greater_equal(first_byte, _HIGH_BIT)
    three_or_more = pc.and_(two_or_more, pc.greater_equal(second_byte, _HIGH_BIT))
    if pc.any(pc.and_(three_or_more, pc.greater_equal(third_byte, _HIGH_BIT))).as_py():
        return None
    raw = pc.bit_wise_or(
        pc.bit_wise_and(first_byte, _LOW_BITS),
        pc.bit_wise_or(
            pc.if_else(
                two_or_more,
                pc.shift_left(pc.bit_wise_and(second_byte, _LOW_BITS), _SEVEN),
                ZERO,
            ),
            pc.if_else(three_or_more, pc.shift_left(third_byte, _FOURTEEN), ZERO),
        ),
    )
    value = pc.bit_wise_xor(
        pc.shift_right(raw, ONE), pc.negate(pc.bit_wise_and(raw, ONE))
    )  # zig-zag: 0, -1, 1, -2, ...
    width = pc.add(pc.add(two_or_more.cast(_INT64), three_or_more.cast(_INT64)), ONE)
    return value, pc.add(positions, width)


def _byte_at(data: pa.Array, positions: pa.Array, last: int) -> pa.Array:
    return pc.take(data, pc.min_element_wise(positions, int64_scalar(last))).cast(_INT64)


def decode_runs(run_ends: list[int], values: list[int], kind: pa.DataType) -> pa.Array:
    """`values[i]` repeated up to row `run_ends[i]` (run-end decoding, in C)."""
    # from_buffers, not from_arrays: the latter looks for numpy on every call
    runs = pa.RunEndEncodedArray.from_buffers(
        pa.run_end_encoded(pa.int32(), kind),
        run_ends[-1] if run_ends else 0,
        [None],
        0,
        0,
        [pa.array(run_ends, type=pa.int32()), pa.array(values, type=kind)],
    )
    return pc.run_end_decode(runs)


def interleave(starts: pa.Array, ends: pa.Array) -> pa.Buffer:
    """An int32 buffer `starts[0], ends[0], starts[1], ends[1], ...`: each pair packed into one
    little-endian int64 (end in the high half), whose memory is the two int32s in order."""
    packed = pc.bit_wise_or(pc.shift_left(ends, _THIRTY_TWO), starts)
    return packed.buffers()[1]


def varint_words(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The zig-zag varint of each int64 value (within ±MAX_WORD_VARINT) as an int64 whose
    little-endian bytes, lowest first, are the varint's bytes, and the varint's width in bytes
    (int64). Only the bytes the largest value needs are computed, and widths are compared only
    where the values do not all take as many bytes."""
    smallest, largest = _min_max(values)
    if smallest >= 0:  # lengths and deltas: the zig-zag value is twice the value
        zigzag = pc.shift_left(values, ONE)
        low, high = 2 * smallest, 2 * largest
    else:
        zigzag = pc.bit_wise_xor(pc.shift_left(values, ONE), pc.shift_right(values, _SIGN_SHIFT))
        low = -2 * largest - 1 if largest < 0 else 0
        high = max(2 * largest, -2 * smallest - 1)
    narrowest, widest = varint_width(low), varint_width(high)
    if widest > _WORD_BYTES:
        raise ValueError(f"a varint of {widest} bytes (values within ±{MAX_WORD_VARINT} only)")
    words = zigzag if widest == 1 else pc.bit_wise_and(zigzag, _LOW_BITS)
    for k in range(1, widest):
        payload = pc.bit_wise_and(pc.shift_left(zigzag, _BYTE_SHIFTS[k]), _BYTE_MASKS[k])
        words = pc.bit_wise_or(words, payload)
    if narrowest == widest:
        if widest > 1:
            words = pc.bit_wise_or(words, _CONTINUATION_SCALARS[widest])
        return words, repeated(widest, len(values))
    widths = None  # bytes past the narrowest width, where the value needs them
    for k in range(narrowest, widest):
        needed = pc.greater_equal(zigzag, _BYTE_THRESHOLDS[k]).cast(_INT64)
        widths = needed if widths is None else pc.add(widths, needed)
    widths = pc.add(widths, int64_scalar(narrowest))
    return pc.bit_wise_or(words, pc.take(_CONTINUATIONS, widths)), widths


def varint_width(zigzag: int) -> int:
    """Bytes of the varint of a zig-zag value."""
    return max(1, (zigzag.bit_length() + 6) // 7)


def _min_max(values: pa.Array) -> tuple[int, int]:
    if len(values) == 0:
        return 0, 0
    extremes = pc.min_max(values).as_py()
    return int(extremes["min"]), int(extremes["max"])


_repeated_cache: dict[int, pa.Array] = {}


def repeated(value: int, count: int) -> pa.Array:
    """An int64 array of `count` times `value`, sliced from a cached one grown on demand."""
    cached = _repeated_cache.get(value)
    if cached is None or len(cached) < count:
        cached = pa.repeat(int64_scalar(value), max(count, 65_536))
        _repeated_cache[value] = cached
    return cached.slice(0, count)


_row_numbers_cache: list[pa.Array] = [pa.array([], type=_INT64)]


def row_numbers(count: int) -> pa.Array:
    """The int64 array 0, 1, ..., count - 1, sliced from a cached one grown on demand."""
    cached = _row_numbers_cache[0]
    if len(cached) < count:
        cached = pc.subtract(pc.cumulative_sum(repeated(1, max(count, 65_536))), ONE)
        _row_numbers_cache[0] = cached
    return cached.slice(0, count)
