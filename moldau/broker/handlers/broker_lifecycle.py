"""What brokers ask of the active controller (KIP-631), on the controller listener:
BrokerRegistration (62) v0-4, BrokerHeartbeat (63) v0-1, AllocateProducerIds (67) v0.

BrokerRegistration v1 adds is_migrating_zk_broker, v2 log dirs (KIP-858), v3 previous broker
epoch; Moldau reads the listeners, rack and incarnation. BrokerHeartbeat v1 adds offline log dirs.
A controller that is not the active one answers NOT_CONTROLLER, and the broker asks again of the
one the quorum names next.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import CONTROLLER, RequestContext, handler
from moldau.controller.operations import BrokerHeartbeat, BrokerRegistration
from moldau.metadata.acls import AclOperation
from moldau.metadata.records import BrokerEndpoint
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.BROKER_REGISTRATION, 0, 4, scopes=(CONTROLLER,))
async def handle_broker_registration(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    registration = BrokerRegistration(
        broker_id=int(request.broker_id),
        incarnation_id=request.incarnation_id,
        endpoints=[
            BrokerEndpoint(
                name=listener.name,
                host=listener.host,
                port=int(listener.port),
                security_protocol=int(listener.security_protocol),
            )
            for listener in request.listeners
        ],
        rack=request.rack,
        is_controller=int(request.broker_id) in ctx.node.layout.voter_ids,
        cluster_id=request.cluster_id,
    )
    try:
        result = await ctx.controller.register_broker(registration)
    except KafkaError as error:
        return {"throttle_time": 0, "error_code": error.code, "broker_epoch": -1}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": result.broker_epoch}


@handler(ApiKey.BROKER_HEARTBEAT, 0, 1, scopes=(CONTROLLER,))
async def handle_broker_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    heartbeat = BrokerHeartbeat(
        broker_id=int(request.broker_id),
        broker_epoch=int(request.broker_epoch),
        current_metadata_offset=int(request.current_metadata_offset),
        want_fence=bool(request.want_fence),
        want_shut_down=bool(request.want_shut_down),
    )
    try:
        result = await ctx.controller.broker_heartbeat(heartbeat)
    except KafkaError as error:
        return {
            "throttle_time": 0,
            "error_code": error.code,
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "is_caught_up": result.is_caught_up,
        "is_fenced": result.is_fenced,
        "should_shut_down": result.should_shut_down,
    }


@handler(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0, scopes=(CONTROLLER,))
async def handle_allocate_producer_ids(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.CLUSTER_ACTION)
    try:
        block = await ctx.controller.allocate_producer_ids(
            int(request.broker_id), int(request.broker_epoch)
        )
    except KafkaError as error:
        return {
            "throttle_time": 0,
            "error_code": error.code,
            "producer_id_start": -1,
            "producer_id_len": 0,
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id_start": block.first_producer_id,
        "producer_id_len": block.size,
    }
