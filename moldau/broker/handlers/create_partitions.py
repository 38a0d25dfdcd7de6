"""CreatePartitions (key 37), v0-3: add partitions to topics through the controller.

v1 is v0 (throttling behaviour change); v2 is flexible; v3 may answer THROTTLING_QUOTA_EXCEEDED
(never here). A count that does not grow the topic is INVALID_PARTITIONS; assignments, when
given, list the replicas of each new partition (INVALID_REPLICA_ASSIGNMENT when they do not fit).
More than 10,000 new partitions in one request, or more than `max.partitions` /
`max.broker.partitions` allow, is POLICY_VIOLATION, decided before anything is placed.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._authorized import for_authorized
from moldau.broker.handlers.create_topics import LOG_CREATION_WAIT_S
from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import CreatePartitionsResult, PartitionsIncrease
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.CREATE_PARTITIONS, 0, 3, forward=True)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    increases = [
        PartitionsIncrease(
            name=topic.name,
            count=topic.count,
            assignments=(
                None
                if topic.assignments is None
                else [list(assignment.broker_ids) for assignment in topic.assignments]
            ),
        )
        for topic in request.topics
    ]

    def allowed(increase: PartitionsIncrease) -> bool:
        return ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, increase.name)

    async def grow(allowed_increases: list[PartitionsIncrease]) -> list[CreatePartitionsResult]:
        return list(
            await ctx.controller.create_partitions(
                allowed_increases, validate_only=bool(request.validate_only)
            )
        )

    def refused(increase: PartitionsIncrease) -> CreatePartitionsResult:
        # No message, as Kafka's: clients show the error's own ("Topic authorization failed.").
        return CreatePartitionsResult(
            name=increase.name, error_code=ErrorCode.topic_authorization_failed
        )

    results = await for_authorized(increases, allowed, grow, refused)
    grown = [r.name for r in results if r.error_code == ErrorCode.none]
    if grown and not request.validate_only:
        await ctx.node.wait_for_partitions(grown, timeout_s=LOG_CREATION_WAIT_S)
    return {
        "throttle_time": 0,
        "results": [
            {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
            for r in results
        ],
    }
