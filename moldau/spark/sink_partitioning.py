"""Where the sink's rows go: each row's partition and the Kafka batches of each partition, decided
as the client's `Producer` decides them for records given one by one.

A row's partition is its `partition` column when set (negative or null: not set), else the
murmur2 partition of its key (`arrow_murmur2`), else the topic's sticky partition (KIP-480): one
partition, picked at random, takes a batch's worth of such rows, then another is picked. Rows are
then grouped by partition (a stable sort: each partition's rows keep their order) and each
partition's rows are cut into batches of at most `batch.size` bytes and `batch.num.messages`
records, greedily, by the sizes `RecordColumns.sizes` bounds (a binary search on their running
sum per batch, so Python runs per batch, not per row).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.spark.arrow_murmur2 import partitions_for_keys
from moldau.spark.arrow_varints import ZERO, decode_runs

__all__ = ["BatchPlan", "StickyPartitions", "plan_batches"]

_INT64: Final = pa.int64()
_NO_PARTITION: Final = pa.scalar(None, _INT64)


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Rows in the order they are written (`order`: row indices, None: as they are), cut into
    batches: (start, end, partition) ranges of that order, covering it."""

    order: pa.Array | None
    batches: list[tuple[int, int, int]]


class StickyPartitions:
    """The partition of rows with neither key nor partition, per topic: kept for one batch, then
    a new one is picked at random, as the producer's sticky partitioner does."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def next_batch(self, topic: str, partition_count: int) -> int:
        """The partition for the next batch of such rows of `topic`."""
        current = self._current.get(topic)
        if current is None or current >= partition_count:
            current = self._rng.randrange(partition_count)
        self._current[topic] = self._rng.randrange(partition_count)
        return current


def plan_batches(
    *,
    topic: str,
    partition_count: int,
    partitions: pa.Array | None,
    keys: pa.Array | None,
    sizes: pa.Array,
    batch_bytes: int,
    batch_records: int,
    sticky: StickyPartitions,
) -> BatchPlan:
    """Partition and batches for rows of `topic` with the `partition` column `partitions`, the
    `keys` column (binary) and record `sizes` (int64). Raises ValueError for a partition the
    topic does not have."""
    count = len(sizes)
    chosen = _given_partitions(topic, partitions, partition_count)
    if keys is not None and (chosen is None or chosen.null_count):
        hashed = partitions_for_keys(keys, partition_count)
        keyed = pc.if_else(pc.is_valid(keys), hashed, _NO_PARTITION) if keys.null_count else hashed
        chosen = keyed if chosen is None else pc.coalesce(chosen, keyed)
    if chosen is None:  # no row has a key or a partition: each batch of rows in turn, sticky
        ranges = split_runs(_running_sums(sizes), 0, count, batch_bytes, batch_records)
        return BatchPlan(
            None, [(start, end, sticky.next_batch(topic, partition_count)) for start, end in ranges]
        )
    if chosen.null_count:
        chosen = _sticky_partitions(
            topic, chosen, sizes, partition_count, batch_bytes, batch_records, sticky
        )
    extremes = pc.min_max(chosen).as_py()
    if extremes["min"] == extremes["max"]:
        order = None
        runs = [(0, count, int(extremes["min"]))]
    else:
        order = pc.sort_indices(chosen)  # stable: a partition's rows keep their order
        sizes = pc.take(sizes, order)
        encoded = pc.run_end_encode(pc.take(chosen, order), run_end_type=_INT64)
        ends = encoded.run_ends.to_pylist()
        runs = list(zip([0, *ends[:-1]], ends, encoded.values.to_pylist(), strict=True))
    running = _running_sums(sizes)
    batches = [
        (start, end, partition)
        for first, last, partition in runs
        for start, end in split_runs(running, first, last, batch_bytes, batch_records)
    ]
    return BatchPlan(order, batches)


def split_runs(
    running: Sequence[int], first: int, last: int, batch_bytes: int, batch_records: int
) -> list[tuple[int, int]]:
    """Rows [first, last) cut greedily into ranges of at most `batch_bytes` bytes (a larger row
    alone) and `batch_records` rows; `running[i]` is the bytes of rows 0..i."""
    ranges = []
    start = first
    while start < last:
        before = running[start - 1] if start else 0
        end = bisect.bisect_right(running, before + batch_bytes, start, last)
        end = min(max(end, start + 1), start + batch_records)
        ranges.append((start, end))
        start = end
    return ranges


def _given_partitions(
    topic: str, partitions: pa.Array | None, partition_count: int
) -> pa.Array | None:
    """The partition column with negatives as nulls (not set); None if no row sets one."""
    if partitions is None or partitions.null_count == len(partitions):
        return None
    given = partitions.cast(_INT64)
    largest = pc.max(given).as_py()
    if largest is not None and largest >= partition_count:
        raise ValueError(
            f"topic '{topic}' has no partition {largest} (it has {partition_count}): "
            "check the 'partition' column"
        )
    if (pc.min(given).as_py() or 0) < 0:
        given = pc.if_else(pc.less(given, ZERO), _NO_PARTITION, given)
    return given if given.null_count < len(given) else None


def _sticky_partitions(
    topic: str,
    chosen: pa.Array,
    sizes: pa.Array,
    partition_count: int,
    batch_bytes: int,
    batch_records: int,
    sticky: StickyPartitions,
) -> pa.Array:
    """`chosen` with its nulls set batch by batch to sticky partitions."""
    unset = pc.is_null(chosen)
    unset_sizes = pc.filter(sizes, unset)
    running = _running_sums(unset_sizes)
    ranges = split_runs(running, 0, len(unset_sizes), batch_bytes, batch_records)
    picked = decode_runs(
        [end for _start, end in ranges],
        [sticky.next_batch(topic, partition_count) for _range in ranges],
        _INT64,
    )
    return pc.replace_with_mask(chosen, unset, picked)


def _running_sums(sizes: pa.Array) -> memoryview:
    """The running sum of `sizes` as a sequence of Python ints (bisect reads it in place)."""
    running = pc.cumulative_sum(sizes) if len(sizes) else pa.array([], type=_INT64)
    buffer = running.buffers()[1]
    view = memoryview(buffer).cast("q") if buffer is not None else memoryview(b"").cast("q")
    return view[running.offset : running.offset + len(running)]
