"""AlterReplicaLogDirs (key 34), v1-2: move replicas of this broker to other log dirs (KIP-113).

v1 is v0 (throttling change; Kafka 4 serves v1 and up, KIP-896); v2 flexible. Each partition
gets its own error code: LOG_DIR_NOT_FOUND for a path that is not one of `log.dirs` (absolute,
as DescribeLogDirs reports it), KAFKA_STORAGE_ERROR for a log dir that is not online or an
offline replica, REPLICA_NOT_AVAILABLE when this broker has no replica yet (it will be created
in that dir), INVALID_TOPIC_EXCEPTION for a name no topic can have, INVALID_REQUEST for a
partition named more than once. Success means the move is started (or the replica is there
already); DescribeLogDirs shows it with IsFutureKey until it is done. The move is
`moldau.storage.log_dir_moves`'s; broker-local, as Moldau's metadata has no directory ids.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.topic_names import validate_topic_name
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)
def handle_alter_replica_log_dirs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    named = Counter(
        (topic.name, partition)
        for log_dir in request.dirs
        for topic in log_dir.topics
        for partition in topic.partitions
    )
    results: dict[str, list[dict[str, Any]]] = {}
    allowed = ctx.authorized_cluster(AclOperation.ALTER)
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            answers = results.setdefault(topic.name, [])
            for partition in topic.partitions:
                code = (
                    _alter(ctx, topic.name, partition, log_dir.path, named)
                    if allowed
                    else ErrorCode.cluster_authorization_failed
                )
                answers.append({"partition_index": partition, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [
            {"topic_name": name, "partitions": partitions} for name, partitions in results.items()
        ],
    }


def _alter(
    ctx: RequestContext, topic: str, partition: int, path: str, named: Counter[tuple[str, int]]
) -> ErrorCode:
    if named[(topic, partition)] > 1:
        return ErrorCode.invalid_request
    try:
        validate_topic_name(topic)
        if partition < 0:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        ctx.node.replica_manager.alter_replica_log_dir(TopicPartition(topic, partition), path)
    except KafkaError as error:
        return error.code
    return ErrorCode.none
