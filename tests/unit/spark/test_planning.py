"""Offset ranges, their splitting per minPartitions / maxRecordsPerPartition, and read limits."""

from __future__ import annotations

from moldau.spark.planning import OffsetRange, apply_max_offsets, offset_ranges, split_ranges
from moldau.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_one_range_per_non_empty_partition() -> None:
    ranges = offset_ranges({A0: 5, A1: 3}, {A0: 9, A1: 3, B0: 2})
    assert ranges == [OffsetRange("a", 0, 5, 9), OffsetRange("b", 0, 0, 2)]


def test_min_partitions_is_reached_in_proportion_to_size() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 0, 10), OffsetRange("b", 0, 0, 10)]
    split = split_ranges(ranges, min_partitions=7)
    assert len(split) == 7
    assert sum(r.size for r in split) == 30
    big = split_ranges([OffsetRange("a", 0, 0, 90), OffsetRange("b", 0, 0, 10)], min_partitions=10)
    assert [r.topic for r in big].count("a") == 9
    assert split_ranges([OffsetRange("a", 0, 0, 2)], min_partitions=5) == [
        OffsetRange("a", 0, 0, 1),
        OffsetRange("a", 0, 1, 2),
    ]


def test_max_records_per_partition_caps_each_piece() -> None:
    split = split_ranges([OffsetRange("a", 0, 100, 125)], max_records_per_partition=10)
    assert [(r.start, r.end) for r in split] == [(100, 108), (108, 117), (117, 125)]


def test_max_offsets_shares_the_limit_by_backlog() -> None:
    ends = apply_max_offsets({A0: 0, A1: 100}, {A0: 300, A1: 200}, 100)
    assert ends == {A0: 75, A1: 125}
    assert apply_max_offsets({A0: 0}, {A0: 5}, 100) == {A0: 5}
    # A partition with a tiny backlog still moves.
    assert apply_max_offsets({A0: 0, A1: 0}, {A0: 1000, A1: 1}, 10)[A1] == 1
