"""TxnOffsetCommit (key 28), v0-5: commit a group's offsets inside a producer's transaction.

v1 is v0; v2 adds committed_leader_epoch; v3 adds generation_id, member_id and
group_instance_id (KIP-447: the group fences zombie members) and flexible versions, and
PRODUCER_FENCED; v4 TRANSACTION_ABORTABLE; v5 is v4 for transaction version 2. The offsets stay
pending until the transaction's marker reaches the group's `__consumer_offsets` partition.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_partitions_to_txn import fenced_code
from moldau.broker.handlers.produce import ask_transaction_coordinator
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
    code = await _check_transaction(ctx, request)
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


async def _check_transaction(ctx: RequestContext, request: Any) -> int:
    """KIP-890 part 1 for offsets, as Kafka's group coordinator verifies them: the group's
    partition must be in the producer's ongoing transaction (AddOffsetsToTxn came first), asked
    of the transaction coordinator wherever it is. A TxnOffsetCommit that arrives late (its
    transaction already ended) or without AddOffsetsToTxn would otherwise stay pending for good,
    no marker ever coming for it, and every read_committed consumer's OffsetFetch of the group
    (require_stable) would answer UNSTABLE_OFFSET_COMMIT from then on."""
    transactions = ctx.node.transaction_coordinator
    groups = ctx.node.group_coordinator
    if transactions is None or groups is None:
        return int(ErrorCode.none)
    tp = TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id))
    if transactions.is_coordinator_for(request.transactional_id):
        code = _offsets_error(
            transactions.verify_partition(
                transactional_id=request.transactional_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                tp=tp,
            )
        )
    else:
        codes = await ask_transaction_coordinator(
            ctx.node,
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [tp],
            error_of=_offsets_error,
        )
        code = codes[tp]
    return int(code)


_RETRIABLE_VERIFICATION = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
        ErrorCode.request_timed_out,
        ErrorCode.network_exception,
        ErrorCode.not_enough_replicas,
    }
)


def _offsets_error(code: int) -> ErrorCode:
    """A verification's outcome as TxnOffsetCommit answers it: what the client retries is
    COORDINATOR_NOT_AVAILABLE (as Kafka's group coordinator normalises it)."""
    if code in _RETRIABLE_VERIFICATION:
        return ErrorCode.coordinator_not_available
    return ErrorCode(code)
