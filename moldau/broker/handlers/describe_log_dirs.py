"""DescribeLogDirs (key 35), v1-4: the log directories of this broker and partition sizes.

v1 is v0 (throttling change); v2 flexible; v3 a top-level error code; v4 total and usable bytes
(KIP-827). A null topic list means every partition. A log dir that is not online answers
KAFKA_STORAGE_ERROR, as Kafka does for an offline one: a failed one lists no partitions, a full
one (Moldau's state: reads still served) still lists them. A replica being moved to another log
dir (AlterReplicaLogDirs) is listed in its target too, with IsFutureKey, its size so far and its
offset lag (the offsets not copied yet).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.storage.log_dir_failures import LogDirState


@handler(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)
def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    log_manager = node.log_manager
    assert log_manager is not None  # (the handler is a broker's)
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):  # (no top-level code before v3)
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed}
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for tp, partition in sorted(node.replica_manager.partitions.items()):
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        log_dir = log_manager.log_dir_of(tp)
        if log_dir is None:
            continue  # (being deleted)
        log = partition.log
        by_dir[log_dir][tp.topic].append(
            {
                "partition_index": tp.partition,
                "partition_size": log.size_bytes,
                "offset_lag": max(log.log_end_offset - log.high_watermark, 0),
                "is_future_key": False,
            }
        )
    for future in log_manager.future_replicas():  # replicas being moved (KIP-113)
        tp = future.topic_partition
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        by_dir[future.log_dir][tp.topic].append(
            {
                "partition_index": tp.partition,
                "partition_size": future.size_bytes,
                "offset_lag": future.offset_lag,
                "is_future_key": True,
            }
        )
    results = []
    for log_dir in node.config.log_dirs:
        absolute = os.path.abspath(log_dir)
        topics = by_dir.get(absolute) or by_dir.get(log_dir) or {}
        failures = node.log_manager.failures if node.log_manager is not None else None
        state = failures.state(log_dir.rstrip("/") or "/") if failures else LogDirState.ONLINE
        if state is LogDirState.FAILED:
            topics = {}
        try:
            stat = os.statvfs(log_dir)
            total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
        except OSError:
            total = usable = -1
        results.append(
            {
                "error_code": (
                    ErrorCode.none if state is LogDirState.ONLINE else ErrorCode.kafka_storage_error
                ),
                "log_dir": absolute,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
