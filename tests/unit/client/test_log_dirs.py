"""The log dirs of the admin client: where a replica and its future replica are."""

from __future__ import annotations

from moldau.client.log_dirs import LogDirDescription, ReplicaInfo, replica_log_dirs
from moldau.client.log_dirs import TopicPartitionReplica as Replica
from moldau.types import TopicPartition as TP

DIRS = {
    "/disk/b": LogDirDescription(
        error=None,
        replicas={
            TP("t", 0): ReplicaInfo(size=300, offset_lag=7, is_future=True),
            TP("u", 1): ReplicaInfo(size=50, offset_lag=0, is_future=False),
        },
        total_bytes=1000,
        usable_bytes=400,
    ),
    "/disk/a": LogDirDescription(
        error=None,
        replicas={TP("t", 0): ReplicaInfo(size=900, offset_lag=0, is_future=False)},
        total_bytes=None,
        usable_bytes=None,
    ),
}


def test_replica_log_dirs_finds_the_current_and_the_future_replica() -> None:
    found = replica_log_dirs(2, [TP("t", 0), TP("u", 1), TP("v", 0)], DIRS)
    moving = found[Replica("t", 0, 2)]
    assert (moving.current_log_dir, moving.future_log_dir) == ("/disk/a", "/disk/b")
    assert moving.future_offset_lag == 7
    still = found[Replica("u", 1, 2)]
    assert (still.current_log_dir, still.future_log_dir) == ("/disk/b", None)
    missing = found[Replica("v", 0, 2)]
    assert (missing.current_log_dir, missing.future_log_dir) == (None, None)
