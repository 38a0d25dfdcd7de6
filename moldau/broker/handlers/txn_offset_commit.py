"""TxnOffsetCommit (key 28), v0-5: commit a group's offsets inside a producer's transaction.

v1 is v0; v2 adds committed_leader_epoch; v3 adds generation_id, member_id and
group_instance_id (KIP-447: the group fences zombie members) and flexible versions, and
PRODUCER_FENCED; v4 TRANSACTION_ABORTABLE; v5 is for clients of transaction version 2 (KIP-890
part 2), which send no AddOffsetsToTxn: the group's `__consumer_offsets` partition is added to
the transaction here, where older versions only verify that AddOffsetsToTxn added it. The offsets
stay pending until the transaction's marker reaches that partition.

The principal needs WRITE on the transactional id and READ on the group (else every partition
answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or GROUP_AUTHORIZATION_FAILED), and READ on each
topic (TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_partitions_to_txn import fenced_code
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 5, in_order=True)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.node.metadata_image
    commits: list[PartitionCommit] = []
    codes: dict[tuple[str, int], int] = {}
    order: list[tuple[str, list[int]]] = []
    refusal = _refusal(ctx, request)
    for topic in request.topics:
        known = image.topics.get(topic.name)
        topic_refusal = refusal
        if refusal is None and not ctx.authorized(
            AclOperation.READ, ResourceType.TOPIC, topic.name
        ):
            topic_refusal = ErrorCode.topic_authorization_failed
        indexes = []
        for partition in topic.partitions:
            index = partition.partition_index
            indexes.append(index)
            refused = topic_refusal
            if refused is None and (known is None or index not in known.partitions):
                refused = ErrorCode.unknown_topic_or_partition
            if refused is not None:
                codes[(topic.name, index)] = refused
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
    code = await _check_transaction(ctx, request) if commits else int(ErrorCode.none)
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


def _refusal(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """The error of every partition when the principal may not write the transactional id or
    read the group."""
    if not ctx.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    return None


async def _check_transaction(ctx: RequestContext, request: Any) -> int:
    """KIP-890 for offsets, as Kafka's group coordinator does it: the group's partition must be
    in the producer's ongoing transaction (part 1: AddOffsetsToTxn came first; part 2, v5: it
    is added now), asked of the transaction coordinator wherever it is. A TxnOffsetCommit that
    arrives late (its transaction already ended) or without AddOffsetsToTxn would otherwise stay
    pending for good, no marker ever coming for it, and every read_committed consumer's
    OffsetFetch of the group (require_stable) would answer UNSTABLE_OFFSET_COMMIT from then on."""
    link = ctx.node.transaction_link
    groups = ctx.node.group_coordinator
    if link is None or groups is None:
        return int(ErrorCode.none)
    tp = TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id))
    codes = await link.add_or_verify(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        [tp],
        add=ctx.api_version >= 5,
    )
    return int(_offsets_error(codes[tp]))


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
