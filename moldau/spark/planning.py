"""Planning reads: offset ranges per topic-partition, split for parallelism, and read limits.

Pure functions over `{TopicPartition: offset}` maps (Spark's `KafkaOffsetRangeCalculator` and
`KafkaMicroBatchStream.rateLimit` do the same jobs). A range is `[start, end)`; a read task
gets one range, so one Spark input partition reads one slice of one topic-partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.types import TopicPartition

__all__ = ["OffsetRange", "apply_max_offsets", "offset_ranges", "split_ranges"]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def offset_ranges(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition present in `ends`, skipping empty ones."""
    ranges = []
    for tp in sorted(ends):
        start, end = starts.get(tp, 0), ends[tp]
        if end > start:
            ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return ranges


def _split(offset_range: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, offset_range.size))
    step = offset_range.size / parts
    bounds = [offset_range.start + round(step * i) for i in range(parts)] + [offset_range.end]
    return [
        OffsetRange(offset_range.topic, offset_range.partition, bounds[i], bounds[i + 1])
        for i in range(parts)
        if bounds[i + 1] > bounds[i]
    ]


def _split_in_proportion(ranges: list[OffsetRange], wanted: int) -> list[OffsetRange]:
    """Split into `wanted` pieces (or as many as there are offsets), shared by size; the pieces
    left over after rounding down go to the largest remainders."""
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    wanted = min(wanted, total)
    shares = [r.size / total * wanted for r in ranges]
    parts = [max(1, math.floor(share)) for share in shares]
    by_remainder = sorted(range(len(ranges)), key=lambda i: parts[i] - shares[i])
    for index in by_remainder:
        if sum(parts) >= wanted:
            break
        if parts[index] < ranges[index].size:
            parts[index] += 1
    return [piece for r, n in zip(ranges, parts, strict=True) for piece in _split(r, n)]


def split_ranges(
    ranges: list[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split large ranges so there are at least `min_partitions` (each range in proportion to its
    size, as Spark's Kafka source does) and none holds more than `max_records_per_partition`."""
    if max_records_per_partition:
        ranges = [
            piece
            for r in ranges
            for piece in _split(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions and len(ranges) < min_partitions:
        ranges = _split_in_proportion(ranges, min_partitions)
    return ranges


def apply_max_offsets(
    starts: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_offsets: int,
) -> dict[TopicPartition, int]:
    """End offsets reading at most `max_offsets` records in total, shared out across partitions
    in proportion to their backlog (every partition with a backlog makes progress)."""
    backlog = {tp: max(0, end - starts.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        start = starts.get(tp, end)
        share = backlog[tp] / total * max_offsets
        step = math.floor(share) if share >= 1 or backlog[tp] == 0 else 1
        ends[tp] = min(end, start + step)
    return ends
