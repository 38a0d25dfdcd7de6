"""InitProducerId (key 22), v0-5: a producer id and epoch for idempotent and transactional producers.

v1 is v0 (throttling); v2 flexible; v3 lets a producer pass its current id and epoch to bump
the epoch (KIP-360); v4 adds PRODUCER_FENCED (KIP-588: older versions get INVALID_PRODUCER_EPOCH);
v5 TRANSACTION_ABORTABLE (KIP-890). (v6, two-phase commit, KIP-939, is not served.) An
idempotent producer without a transactional id always gets a fresh producer id with epoch 0, as
Kafka does; a transactional id goes to its transaction coordinator, which bumps the epoch (or
moves to a new producer id) and fences the previous producer with that id.

A transactional producer needs WRITE on its transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent one IDEMPOTENT_WRITE on the cluster or
WRITE on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    transactional_id = getattr(request, "transactional_id", None)
    refusal = _refusal(ctx, transactional_id)
    if refusal is not None:
        return _error(refusal)
    if transactional_id is not None:
        runtime = node.transaction_coordinator
        if runtime is None:
            return _error(ErrorCode.coordinator_not_available)
        try:
            answer = await runtime.init_producer_id(
                transactional_id=transactional_id,
                transaction_timeout_ms=millis(request.transaction_timeout),
                producer_id=getattr(request, "producer_id", -1),
                producer_epoch=getattr(request, "producer_epoch", -1),
            )
        except KafkaError as error:
            return _error(error.code)
        code = answer["error_code"]
        if code == ErrorCode.producer_fenced and ctx.api_version < 4:
            code = ErrorCode.invalid_producer_epoch
        return {
            "throttle_time": 0,
            "error_code": code,
            "producer_id": answer["producer_id"],
            "producer_epoch": answer["producer_epoch"],
        }
    producer_id = await node.producer_id_manager.generate()
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if ctx.authorized_cluster(AclOperation.IDEMPOTENT_WRITE) or ctx.authorized_any(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.cluster_authorization_failed


def _error(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
