"""Kafka's default partition of a column of keys is `partition_for_key` of each key."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from moldau.client.partitioner import partition_for_key
from moldau.spark.arrow_murmur2 import partitions_for_keys

# Kafka's UtilsTest.testMurmur2 vectors, as in tests/unit/client/test_partitioner.py
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def test_kafka_s_vectors_land_where_kafka_puts_them() -> None:
    keys = [key for key, _hash in KAFKA_VECTORS]
    for count in (1, 7, 1000, 2**31 - 1):
        expected = [(hashed & 0x7FFFFFFF) % count for _key, hashed in KAFKA_VECTORS]
        assert partitions_for_keys(pa.array(keys, pa.binary()), count).to_pylist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_keys_of_every_length_match_the_producer_s_partitioner(seed: int) -> None:
    rng = random.Random(seed)
    keys = [rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 100])) for _ in range(500)]
    count = rng.randrange(1, 64)
    array = pa.array([b"unused", *keys], pa.binary()).slice(1)  # an offset into the buffers
    assert partitions_for_keys(array, count).to_pylist() == [
        partition_for_key(key, count) for key in keys
    ]


def test_string_keys_hash_as_their_utf8_bytes() -> None:
    keys = ["käse", "k", "", "0123456789"]
    assert partitions_for_keys(pa.array(keys), 12).to_pylist() == [
        partition_for_key(key.encode(), 12) for key in keys
    ]
