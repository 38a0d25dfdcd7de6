"""InitProducerId (key 22), v0-6: a producer id and epoch for idempotent producers.

v1 is v0 (throttling); v2 flexible; v3 lets a producer pass its current id and epoch to bump
the epoch (KIP-360); v4 allows UNKNOWN_PRODUCER_ID to be retried; v5 adds PRODUCER_FENCED
(KIP-588); v6 the two-phase-commit fields (KIP-939). An idempotent producer without a
transactional id always gets a fresh producer id with epoch 0, as Kafka does. Transactional ids
need the transaction coordinator; until a node has one they are refused.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is not None:
        coordinator = node.transaction_coordinator
        if coordinator is None:
            log.warning(
                "refusing transactional id %r: no transaction coordinator", transactional_id
            )
            return _error(ErrorCode.unknown_server_error)
        return await coordinator.handle_init_producer_id(ctx, request)  # type: ignore[no-any-return]
    producer_id = await node.producer_id_manager.generate()
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }


def _error(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
