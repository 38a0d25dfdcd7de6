"""AddPartitionsToTxn (key 24), v0-5: add partitions to a producer's ongoing transaction.

v1 is v0; v2 adds PRODUCER_FENCED (KIP-588: older versions get INVALID_PRODUCER_EPOCH); v3
flexible; v4 batches transactions for brokers (`transactions` in, `results_by_transaction` out,
with `verify_only` for KIP-890's server-side verification; the v3 fields are renamed
`v3_and_below_*`); v5 adds TRANSACTION_ABORTABLE. Errors apply to every partition of a
transaction, as in Kafka.

A client (v0-3) needs WRITE on the transactional id (else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED, the other
partitions OPERATION_NOT_ATTEMPTED); a broker (v4+) CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED, top level).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


def fenced_code(code: int, version: int, since: int) -> int:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for versions before `since` (KIP-588)."""
    if code == ErrorCode.producer_fenced and version < since:
        return int(ErrorCode.invalid_producer_epoch)
    return int(code)


async def _add(
    ctx: RequestContext,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Any,
    verify_only: bool,
) -> list[dict[str, Any]]:
    image = ctx.node.metadata_image
    client = ctx.api_version <= 3  # (brokers' requests are authorized as a whole)
    wanted: list[TopicPartition] = []
    codes: dict[TopicPartition, int] = {}
    for topic in topics:
        known = image.topics.get(topic.name)
        denied = client and not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        for index in topic.partitions:
            tp = TopicPartition(topic.name, index)
            wanted.append(tp)
            if denied:
                codes[tp] = ErrorCode.topic_authorization_failed
            elif known is None or index not in known.partitions:
                codes[tp] = ErrorCode.unknown_topic_or_partition
    if client and not ctx.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        codes = dict.fromkeys(wanted, int(ErrorCode.transactional_id_authorization_failed))
    elif codes:  # Kafka refuses the whole request: the others get OPERATION_NOT_ATTEMPTED
        for tp in wanted:
            codes.setdefault(tp, ErrorCode.operation_not_attempted)
    else:
        runtime = ctx.node.transaction_coordinator
        try:
            if runtime is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            answer = await runtime.add_partitions(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=wanted,
                verify_only=verify_only,
            )
            codes = {tp: int(code) for tp, code in answer["partitions"].items()}
        except KafkaError as error:
            codes = dict.fromkeys(wanted, int(error.code))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "partition_error_code": fenced_code(codes[tp], ctx.api_version, 2),
            }
        )
    return [
        {"name": name, "results_by_partition": partitions} for name, partitions in by_topic.items()
    ]


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.api_version <= 3:
        results = await _add(
            ctx,
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            topics=request.v3_and_below_topics,
            verify_only=False,
        )
        return {"throttle_time": 0, "results_by_topic_v3_and_below": results}
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    by_transaction = []
    for transaction in request.transactions:
        results = await _add(
            ctx,
            transactional_id=transaction.transactional_id,
            producer_id=transaction.producer_id,
            producer_epoch=transaction.producer_epoch,
            topics=transaction.topics,
            verify_only=transaction.verify_only,
        )
        by_transaction.append(
            {"transactional_id": transaction.transactional_id, "topic_results": results}
        )
    return {"throttle_time": 0, "error_code": 0, "results_by_transaction": by_transaction}
