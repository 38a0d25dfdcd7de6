"""Kafka's default partition of a column of keys is `partition_for_key` of each key."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from moldau.client.partitioner import partition_for_key
from moldau.spark.arrow_murmur2 import partitions_for_keys

# The keys of Kafka's UtilsTest.testMurmur2 (tests/unit/client/test_partitioner.py checks
# `partition_for_key` against their hashes)
KAFKA_KEYS = [b"21", b"foobar", b"a-little-bit-long-string", b"abc"]


def test_kafka_s_test_keys_land_where_the_producer_puts_them() -> None:
    for count in (1, 7, 1000, 2**31 - 1):
        assert partitions_for_keys(pa.array(KAFKA_KEYS, pa.binary()), count).to_pylist() == [
            partition_for_key(key, count) for key in KAFKA_KEYS
        ]


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
