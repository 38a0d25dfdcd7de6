"""AlterPartitionReassignments (key 45), v0-1: move partitions to new replicas (KIP-455).

v0 is flexible; v1 adds `allow_replication_factor_change` (KIP-860; false refuses a target of
another length with INVALID_REPLICATION_FACTOR). Targets are checked as Kafka does (empty,
unregistered or repeated brokers are INVALID_REPLICA_ASSIGNMENT; unknown partitions
UNKNOWN_TOPIC_OR_PARTITION); cancelling (null replicas) with nothing in progress is
NO_REASSIGNMENT_IN_PROGRESS. A success means the reassignment is started (or cancelled) in the
committed metadata, not finished: `moldau.controller.reassignment` says how it goes on.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import PartitionReassignment
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, forward=True)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.ALTER)
    allow_change = bool(getattr(request, "allow_replication_factor_change", True))
    reassignments = [
        PartitionReassignment(
            topic=topic.name,
            partition=partition.partition_index,
            replicas=None if partition.replicas is None else list(partition.replicas),
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    results = iter(
        await ctx.controller.alter_partition_reassignments(
            reassignments, allow_replication_factor_change=allow_change
        )
    )
    return {
        "throttle_time": 0,
        "allow_replication_factor_change": allow_change,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": result.partition,
                        "error_code": result.error_code,
                        "error_message": result.error_message,
                    }
                    for result in (next(results) for _ in topic.partitions)
                ],
            }
            for topic in request.topics
        ],
    }
