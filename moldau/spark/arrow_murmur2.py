"""Kafka's default partitioner for a column of keys: murmur2 of each key, sign bit cleared, modulo
the partition count, as `moldau.client.partitioner.partition_for_key` computes it for one key.

Column-wise with Arrow compute: murmur2 mixes a key's 4-byte words one after another, so the
keys are sorted longest first and word j is mixed into the hashes of the prefix of keys that have
one (`binary_slice` of those keys is then exactly 4 bytes each, read as uint32 without a copy).
The last 1-3 bytes and the final mix follow for all keys, and the hashes go back to row order.
uint32 products wrap as Java's int products do. Words are read as memory: little-endian only
(`arrow_batches.LITTLE_ENDIAN`).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["partitions_for_keys"]

_UINT32: Final = pa.uint32()
_INT64: Final = pa.int64()


def _u32(value: int) -> pa.Scalar:
    return pa.scalar(value, _UINT32)


_SEED: Final = _u32(0x9747B28C)
_M: Final = _u32(0x5BD1E995)
_SHIFTS: Final = {bits: _u32(bits) for bits in (8, 13, 15, 16, 24)}
_POSITIVE: Final = _u32(0x7FFFFFFF)
_ZERO: Final = _u32(0)


def partitions_for_keys(keys: pa.Array, partition_count: int) -> pa.Array:
    """The int64 partition of each key of a binary column (a null key hashes as empty)."""
    if len(keys) == 0:
        return pa.array([], type=_INT64)
    if keys.type != pa.binary():
        keys = keys.cast(pa.binary())
    keys = pc.fill_null(keys, pa.scalar(b"", pa.binary())) if keys.null_count else keys
    lengths = pc.binary_length(keys).cast(_INT64)
    extremes = pc.min_max(lengths).as_py()
    order = None
    if extremes["min"] != extremes["max"]:  # longest first: the keys with word j are a prefix
        order = pc.sort_indices(lengths, sort_keys=[("", "descending")])
        keys, lengths = pc.take(keys, order), pc.take(lengths, order)
    hashes = pc.bit_wise_xor(lengths.cast(_UINT32), _SEED)
    for word in range(extremes["max"] // 4):
        having = pc.sum(pc.greater_equal(lengths, pa.scalar(4 * word + 4, _INT64))).as_py()
        mixed = _mix_word(hashes.slice(0, having), keys.slice(0, having), word)
        hashes = mixed if having == len(keys) else pa.concat_arrays([mixed, hashes.slice(having)])
    hashes = _mix_tail(hashes, keys, lengths)
    hashes = pc.bit_wise_xor(hashes, pc.shift_right(hashes, _SHIFTS[13]))
    hashes = pc.multiply(hashes, _M)
    hashes = pc.bit_wise_xor(hashes, pc.shift_right(hashes, _SHIFTS[15]))
    positive = pc.bit_wise_and(hashes, _POSITIVE).cast(_INT64)
    count = pa.scalar(partition_count, _INT64)
    partitions = pc.subtract(positive, pc.multiply(pc.divide(positive, count), count))
    if order is None:
        return partitions
    return pc.take(partitions, pc.sort_indices(order))  # back to row order


def _mix_word(hashes: pa.Array, keys: pa.Array, word: int) -> pa.Array:
    """h = h * m ^ mix(k) for word `word` of keys that all have it."""
    slices = pc.binary_slice(keys, 4 * word, 4 * word + 4)
    data = slices.buffers()[2]
    words = pa.Array.from_buffers(_UINT32, len(slices), [None, data], offset=slices.offset)
    mixed = pc.multiply(words, _M)
    mixed = pc.bit_wise_xor(mixed, pc.shift_right(mixed, _SHIFTS[24]))
    mixed = pc.multiply(mixed, _M)
    return pc.bit_wise_xor(pc.multiply(hashes, _M), mixed)


def _mix_tail(hashes: pa.Array, keys: pa.Array, lengths: pa.Array) -> pa.Array:
    """The last `length % 4` bytes of each key: xor-ed in at bits 16, 8 and 0, then h *= m."""
    remaining = pc.bit_wise_and(lengths, pa.scalar(3, _INT64))
    if not pc.any(pc.not_equal(remaining, pa.scalar(0, _INT64))).as_py():
        return hashes
    tail_start = pc.subtract(lengths, remaining)
    offsets = keys.buffers()[1]
    data = keys.buffers()[2]
    assert offsets is not None and data is not None
    starts = pa.Array.from_buffers(pa.int32(), len(keys), [None, offsets], offset=keys.offset)
    byte_data = pa.Array.from_buffers(pa.uint8(), data.size, [None, data])
    last = pa.scalar(max(data.size - 1, 0), _INT64)
    for index, shift in ((2, 16), (1, 8), (0, 0)):
        has_byte = pc.greater(remaining, pa.scalar(index, _INT64))
        position = pc.add(pc.add(starts.cast(_INT64), tail_start), pa.scalar(index, _INT64))
        byte = pc.take(byte_data, pc.min_element_wise(position, last)).cast(_UINT32)
        if shift:
            byte = pc.shift_left(byte, _SHIFTS[shift])
        hashes = pc.bit_wise_xor(hashes, pc.if_else(has_byte, byte, _ZERO))
    return pc.if_else(pc.greater(remaining, pa.scalar(0, _INT64)), pc.multiply(hashes, _M), hashes)
