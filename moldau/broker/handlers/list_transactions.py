"""ListTransactions (key 66), v0-2: the transactional ids this node coordinates (KIP-664).

v0 filters by state names and producer ids (unknown state names are echoed back in
`unknown_state_filters`); v1 adds a minimum duration of ongoing transactions (KIP-994); v2 a
regular expression on the transactional id (KIP-1152). Only the ids the principal may DESCRIBE
are listed, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.transaction_records import TransactionState
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

_BY_NAME = {state.kafka_name: state for state in TransactionState}


@handler(ApiKey.LIST_TRANSACTIONS, 0, 2)
def handle_list_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    runtime = ctx.node.transaction_coordinator
    if runtime is None:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.coordinator_not_available,
            "unknown_state_filters": [],
            "transaction_states": [],
        }
    names = list(request.state_filters)
    unknown = [name for name in names if name not in _BY_NAME]
    states = {_BY_NAME[name] for name in names if name in _BY_NAME}
    listed: list[dict[str, Any]]
    if names and not states:
        code, listed = ErrorCode.none, []
    else:
        code, listed = runtime.list_transactions(
            states=states or None,
            producer_ids=set(request.producer_id_filters) or None,
            min_duration_ms=getattr(request, "duration_filter", -1),
            pattern=getattr(request, "transactional_id_pattern", None),
        )
    listed = [
        state
        for state in listed
        if ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, state["transactional_id"]
        )
    ]
    return {
        "throttle_time": 0,
        "error_code": code,
        "unknown_state_filters": unknown,
        "transaction_states": listed,
    }
