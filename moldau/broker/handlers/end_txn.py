"""EndTxn (key 26), v0-5: commit or abort a producer's transaction.

v1 is v0; v2 adds PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3 flexible; v4
TRANSACTION_ABORTABLE; v5 is transaction version 2 (KIP-890 part 2): the coordinator bumps the
epoch at the end of every transaction and answers the new producer id and epoch, so a delayed
EndTxn of an older transaction cannot end a newer one. The answer comes once the Prepare* state
is durable; the markers are written after it. The principal needs WRITE on the transactional
id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers.add_partitions_to_txn import fenced_code
from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.transaction_metadata import TRANSACTION_VERSION_2
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.END_TXN, 0, 5)
async def handle_end_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.transaction_coordinator
    answer: dict[str, Any] = {"producer_id": -1, "producer_epoch": -1}
    try:
        ctx.require(
            AclOperation.WRITE,
            ResourceType.TRANSACTIONAL_ID,
            request.transactional_id,
            ErrorCode.transactional_id_authorization_failed,
        )
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        answer = await runtime.end_transaction(
            transactional_id=request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            committed=request.committed,
            transaction_version=TRANSACTION_VERSION_2 if ctx.api_version >= 5 else 1,
        )
        code = int(answer["error_code"])
    except KafkaError as error:
        code = int(error.code)
    return {
        "throttle_time": 0,
        "error_code": fenced_code(code, ctx.api_version, 2),
        "producer_id": answer.get("producer_id", -1),
        "producer_epoch": answer.get("producer_epoch", -1),
    }
