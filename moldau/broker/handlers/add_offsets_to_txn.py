"""AddOffsetsToTxn (key 25), v0-4: add a group's `__consumer_offsets` partition to a transaction.

v1 is v0; v2 adds PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3 flexible; v4
TRANSACTION_ABORTABLE. The partition is the group's coordinator partition, so the transaction's
markers reach the group's pending offsets (TxnOffsetCommit). The principal needs WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
(GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_partitions_to_txn import fenced_code
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    transactions = ctx.node.transaction_coordinator
    groups = ctx.node.group_coordinator
    try:
        ctx.require(
            AclOperation.WRITE,
            ResourceType.TRANSACTIONAL_ID,
            request.transactional_id,
            ErrorCode.transactional_id_authorization_failed,
        )
        ctx.require(
            AclOperation.READ,
            ResourceType.GROUP,
            request.group_id,
            ErrorCode.group_authorization_failed,
        )
        if transactions is None or groups is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        if not request.group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        tp = TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id))
        answer = await transactions.add_partitions(
            transactional_id=request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            partitions=[tp],
        )
        code = int(answer["error_code"])
    except KafkaError as error:
        code = int(error.code)
    return {"throttle_time": 0, "error_code": fenced_code(code, ctx.api_version, 2)}
