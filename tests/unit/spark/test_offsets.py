"""Offsets JSON as Spark's Kafka source keeps it in the checkpoint."""

from __future__ import annotations

import json

import pytest

from moldau.spark.offsets import offsets_from_json, offsets_to_json, parse_partition_json
from moldau.types import TopicPartition


def test_round_trip_sorted_with_string_partitions() -> None:
    offsets = {TopicPartition("b", 10): 3, TopicPartition("a", 2): 7, TopicPartition("b", 9): 0}
    encoded = offsets_to_json(offsets)
    assert json.dumps(encoded) == '{"a": {"2": 7}, "b": {"9": 0, "10": 3}}'
    assert offsets_from_json(encoded) == offsets
    assert offsets_from_json(json.dumps(encoded)) == offsets


def test_bad_json_names_the_option() -> None:
    with pytest.raises(ValueError, match="option 'startingOffsets'"):
        parse_partition_json('{"t": [1]}', option="startingOffsets")
    with pytest.raises(ValueError, match="option 'endingOffsets'"):
        parse_partition_json('{"t": {"x": 1}}', option="endingOffsets")
