"""DescribeTransactions (key 65), v0: state, producer, timeout, start time and partitions of
transactional ids (KIP-664). An id coordinated elsewhere answers NOT_COORDINATOR, an unknown one
TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def handle_describe_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.transaction_coordinator
    ids = list(request.transactional_ids)
    if runtime is None:
        states = [
            {"error_code": ErrorCode.coordinator_not_available, "transactional_id": id_}
            for id_ in ids
        ]
    else:
        states = runtime.describe_transactions(ids)
    return {"throttle_time": 0, "transaction_states": states}
