"""TxnOffsetCommit (key 28), v0-5: commit a group's offsets inside a producer's transaction.

v1 is v0; v2 adds committed_leader_epoch; v3 adds generation_id, member_id and
group_instance_id (KIP-447: the group fences zombie members) and flexible versions, and
PRODUCER_FENCED; v4 TRANSACTION_ABORTABLE; v5 is v4 for transaction version 2. The offsets stay
pending until the transaction's marker reaches the group's `__consumer_offsets` partition.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_partitions_to_txn import fenced_code
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 5)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.node.metadata_image
    commits: list[PartitionCommit] = []
    codes: dict[tuple[str, int], int] = {}
    order: list[tuple[str, list[int]]] = []
    for topic in request.topics:
        known = image.topics.get(topic.name)
        indexes = []
        for partition in topic.partitions:
            index = partition.partition_index
            indexes.append(index)
            if known is None or index not in known.partitions:
                codes[(topic.name, index)] = ErrorCode.unknown_topic_or_partition
                continue
            commits.append(
                PartitionCommit(
                    topic=topic.name,
                    partition=index,
                    offset=partition.committed_offset,
                    leader_epoch=getattr(partition, "committed_leader_epoch", -1),
                    metadata=partition.committed_metadata,
                )
            )
        order.append((topic.name, indexes))
    code = _check_transaction(ctx, request)
    if code != ErrorCode.none:
        for commit in commits:
            codes[(commit.topic, commit.partition)] = code
        commits = []
    runtime = ctx.node.group_coordinator
    try:
        if commits:
            if runtime is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            response = await runtime.txn_commit_offsets(
                group_id=request.group_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                generation_id=getattr(request, "generation_id", -1),
                member_id=getattr(request, "member_id", ""),
                group_instance_id=getattr(request, "group_instance_id", None),
                commits=commits,
            )
            for topic in response["topics"]:
                for partition in topic["partitions"]:
                    codes[(topic["name"], partition["partition_index"])] = partition["error_code"]
    except KafkaError as error:
        for commit in commits:
            codes[(commit.topic, commit.partition)] = error.code
    version = ctx.api_version
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": index,
                        "error_code": fenced_code(codes.get((name, index), 0), version, 3),
                    }
                    for index in indexes
                ],
            }
            for name, indexes in order
        ],
    }


def _check_transaction(ctx: RequestContext, request: Any) -> int:
    """The group's partition must be in the producer's ongoing transaction (AddOffsetsToTxn
    came first), when this node coordinates the transactional id."""
    transactions = ctx.node.transaction_coordinator
    groups = ctx.node.group_coordinator
    if transactions is None or groups is None:
        return int(ErrorCode.none)
    tp = TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id))
    code = transactions.verify_partition(
        transactional_id=request.transactional_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        tp=tp,
    )
    return int(code)
