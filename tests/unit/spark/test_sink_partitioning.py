"""Where the sink's rows go: the partition column, else the key's murmur2 partition, else a
sticky partition per batch; each partition's rows in order, cut by bytes and records."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from moldau.client.partitioner import partition_for_key
from moldau.spark.sink_partitioning import BatchPlan, StickyPartitions, plan_batches, split_runs


def _plan(
    count: int,
    *,
    partitions: list[int | None] | None = None,
    keys: list[bytes | None] | None = None,
    size: int = 100,
    batch_bytes: int = 1000,
    batch_records: int = 1000,
    partition_count: int = 3,
    seed: int = 1,
) -> BatchPlan:
    return plan_batches(
        topic="t",
        partition_count=partition_count,
        partitions=None if partitions is None else pa.array(partitions, pa.int32()),
        keys=None if keys is None else pa.array(keys, pa.binary()),
        sizes=pa.array([size] * count, pa.int64()),
        batch_bytes=batch_bytes,
        batch_records=batch_records,
        sticky=StickyPartitions(random.Random(seed)),
    )


def _rows_by_batch(plan: BatchPlan, count: int) -> list[tuple[int, list[int]]]:
    order = list(range(count)) if plan.order is None else plan.order.to_pylist()
    return [(partition, order[start:end]) for start, end, partition in plan.batches]


def test_the_partition_column_then_the_key_then_a_sticky_partition_decide() -> None:
    partitions = [2, None, -1, None, 0, None]
    keys = [b"a", b"key-1", b"key-2", None, None, None]
    plan = _plan(6, partitions=partitions, keys=keys, batch_bytes=10_000)
    placed = {row: p for p, rows in _rows_by_batch(plan, 6) for row in rows}
    assert placed[0] == 2 and placed[4] == 0
    assert placed[1] == partition_for_key(b"key-1", 3)
    assert placed[2] == partition_for_key(b"key-2", 3)
    assert placed[3] == placed[5]  # one batch's worth of rows without either: one partition


def test_a_partition_s_rows_keep_their_order_and_batches_cover_them_once() -> None:
    keys = [b"key-%d" % (i % 5) for i in range(40)]
    rows = _rows_by_batch(_plan(40, keys=keys, batch_bytes=300), 40)
    assert sorted(row for _p, batch in rows for row in batch) == list(range(40))
    for partition in range(3):
        in_partition = [row for p, batch in rows if p == partition for row in batch]
        assert in_partition == sorted(in_partition)
    assert all(len(batch) <= 3 for _p, batch in rows)  # 300 bytes of 100-byte rows


def test_rows_without_key_or_partition_take_a_new_sticky_partition_each_batch() -> None:
    plan = _plan(25, batch_records=7, partition_count=50, seed=3)
    assert plan.order is None  # the rows stay as they are: each batch is a run of them
    assert [(start, end) for start, end, _p in plan.batches] == [
        (0, 7),
        (7, 14),
        (14, 21),
        (21, 25),
    ]
    assert len({partition for _start, _end, partition in plan.batches}) > 1


def test_batches_hold_at_most_batch_bytes_or_one_larger_row() -> None:
    running = [100, 200, 2200, 2300, 2400, 2500]  # row 2 is 2,000 bytes
    assert split_runs(running, 0, 6, 250, 100) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    assert split_runs(running, 3, 6, 1000, 2) == [(3, 5), (5, 6)]


def test_a_partition_the_topic_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="has no partition 3"):
        _plan(2, partitions=[0, 3])
