"""AlterPartition (56), v2-3, on the controller listener: a partition leader's ISR changes
(KIP-497), decided by the active controller (`partition_control.alter_partition`).

v2 names topics by id and lists the new ISR as broker ids; v3 adds each member's broker epoch
(KIP-903), which the controller checks when it is not -1. (v0-1, by topic name, are gone in
Kafka 4.) A refused request (STALE_BROKER_EPOCH, NOT_CONTROLLER) has only a top-level error; a
refused partition only its error code; an accepted one the partition's committed state.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import CONTROLLER, RequestContext, handler
from moldau.controller.operations import AlterPartitionResult, IsrMember, IsrProposal
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.ALTER_PARTITION, 2, 3, scopes=(CONTROLLER,))
async def handle_alter_partition(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    changes = [
        IsrProposal(
            topic_id=topic.topic_id,
            partition=int(partition.partition_index),
            leader_epoch=int(partition.leader_epoch),
            partition_epoch=int(partition.partition_epoch),
            new_isr=_new_isr(partition),
            leader_recovery_state=int(partition.leader_recovery_state),
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    try:
        results = await ctx.controller.alter_partition(
            broker_id=int(request.broker_id),
            broker_epoch=int(request.broker_epoch),
            changes=changes,
        )
    except KafkaError as error:
        return {"throttle_time": 0, "error_code": error.code, "topics": []}
    topics: list[dict[str, Any]] = []
    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for result in results:
        partitions = by_topic.get(result.topic_id)
        if partitions is None:
            partitions = by_topic[result.topic_id] = []
            topics.append({"topic_id": result.topic_id, "partitions": partitions})
        partitions.append(_partition_result(result))
    return {"throttle_time": 0, "error_code": ErrorCode.none, "topics": topics}


def _new_isr(partition: Any) -> list[IsrMember]:
    with_epochs = getattr(partition, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return [
            IsrMember(broker_id=int(member.broker_id), broker_epoch=int(member.broker_epoch))
            for member in with_epochs
        ]
    return [IsrMember(broker_id=int(broker_id)) for broker_id in partition.new_isr]


def _partition_result(result: AlterPartitionResult) -> dict[str, Any]:
    return {
        "partition_index": result.partition,
        "error_code": result.error_code,
        "leader_id": result.leader_id,
        "leader_epoch": result.leader_epoch,
        "isr": list(result.isr),
        "leader_recovery_state": result.leader_recovery_state,
        "partition_epoch": result.partition_epoch,
    }
