"""Zig-zag varints (Kafka's record fields) read at many positions at once with Arrow compute.

Records are varint-framed, so only finding where each record starts needs a Python loop. Given
those starts, each field of every record is read column-wise: `take` of the bytes at the field's
positions, then masks and shifts in C. Varints of up to three bytes (values within ±1,048,575:
every length under 1 MB, offset deltas, timestamp deltas under 17 minutes) are read here; wider
ones make `read_varints` return None and the caller decodes that data record by record.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ONE", "ZERO", "bytes_of", "int64_scalar", "interleave", "read_varints"]

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


def interleave(starts: pa.Array, ends: pa.Array) -> pa.Buffer:
    """An int32 buffer `starts[0], ends[0], starts[1], ends[1], ...`: each pair packed into one
    little-endian int64 (end in the high half), whose memory is the two int32s in order."""
    packed = pc.bit_wise_or(pc.shift_left(ends, _THIRTY_TWO), starts)
    return packed.buffers()[1]
