"""Kafka's default partitioner for keyed records: murmur2 of the key bytes, sign bit cleared,
modulo the partition count (`Utils.murmur2` / `Utils.toPositive` in Kafka's clients).

Records without a key go to a partition chosen by the producer (sticky per batch, as KIP-480).
"""

from __future__ import annotations

from typing import Final

__all__ = ["murmur2", "partition_for_key"]

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_R: Final = 24
_MASK32: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit murmur2 as Kafka computes it, returned as a signed int32 (like Java's int)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    remaining = length & 3
    if remaining == 3:
        h ^= data[whole + 2] << 16
    if remaining >= 2:
        h ^= data[whole + 1] << 8
    if remaining >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition Kafka's default partitioner picks for `key` among `partition_count`."""
    return (murmur2(key) & 0x7FFFFFFF) % partition_count
