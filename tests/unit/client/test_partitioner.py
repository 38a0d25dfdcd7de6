"""Kafka's default partitioner: murmur2 must match Kafka's own test vectors bit for bit."""

from __future__ import annotations

import pytest

from moldau.client.partitioner import murmur2, partition_for_key

# Vectors from Kafka's UtilsTest.testMurmur2 (facts about the hash, not code).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_covers_every_tail_length() -> None:
    values = {murmur2(b"x" * length) for length in range(0, 9)}
    assert len(values) == 9  # lengths 0..8 take every remainder branch and all differ


def test_partition_clears_the_sign_bit_before_the_modulo() -> None:
    # murmur2(b"21") is negative; Kafka uses (hash & 0x7fffffff) % partitions.
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert partition_for_key(b"21", 1) == 0


def test_partition_is_stable_and_in_range() -> None:
    for count in (1, 2, 3, 10, 97):
        for index in range(200):
            key = b"key-%d" % index
            partition = partition_for_key(key, count)
            assert 0 <= partition < count
            assert partition == partition_for_key(key, count)
