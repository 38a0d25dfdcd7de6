"""DescribeTransactions (key 65), v0: state, producer, timeout, start time and partitions of
transactional ids (KIP-664). An id coordinated elsewhere answers NOT_COORDINATOR, an unknown one
TRANSACTIONAL_ID_NOT_FOUND. An id the principal may not DESCRIBE answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and a transaction's partitions leave out the topics it
may not DESCRIBE, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.transaction_runtime import TransactionCoordinatorRuntime
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def handle_describe_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.transaction_coordinator
    states = [_describe(ctx, runtime, id_) for id_ in request.transactional_ids]
    return {"throttle_time": 0, "transaction_states": states}


def _describe(
    ctx: RequestContext, runtime: TransactionCoordinatorRuntime | None, transactional_id: str
) -> dict[str, Any]:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif runtime is None:
        code = ErrorCode.coordinator_not_available
    else:
        [state] = runtime.describe_transactions([transactional_id])
        state["topics"] = [
            topic
            for topic in state.get("topics", ())
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic["topic"])
        ]
        return state
    return {"error_code": code, "transactional_id": transactional_id}
