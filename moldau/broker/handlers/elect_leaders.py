"""ElectLeaders (key 43), v0-2: elect preferred (or, unclean, any live) replicas as leaders
(KIP-183, KIP-460).

v0 always elects the preferred replica; v1 adds `election_type` and a top-level error code;
v2 is flexible. A partition that already has the leader asked for is ELECTION_NOT_NEEDED; an
unknown one is UNKNOWN_TOPIC_OR_PARTITION. With `topic_partitions` null the controller elects
for every partition and, as Kafka does, lists every topic but only the partitions it tried to
elect (on a healthy single node: every topic with no partitions). An unknown election type
fails the whole request with INVALID_REQUEST, repeated for each partition named.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.ELECT_LEADERS, 0, 2, forward=True)
async def handle_elect_leaders(ctx: RequestContext, request: Any) -> dict[str, Any]:
    requested = (
        None
        if request.topic_partitions is None
        else [(topic.topic, list(topic.partitions)) for topic in request.topic_partitions]
    )
    election_type = int(getattr(request, "election_type", 0))
    try:
        ctx.require_cluster(AclOperation.ALTER)
        results = await ctx.controller.elect_leaders(election_type, requested)
    except KafkaError as error:
        return {
            "throttle_time": 0,
            "error_code": error.code,
            "replica_election_results": [
                {
                    "topic": topic,
                    "partition_result": [
                        {
                            "partition_id": partition,
                            "error_code": error.code,
                            "error_message": error.message,
                        }
                        for partition in partitions
                    ],
                }
                for topic, partitions in requested or []
            ],
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": [
            {
                "topic": result.topic,
                "partition_result": [
                    {
                        "partition_id": p.partition,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in result.partitions
                ],
            }
            for result in results
        ],
    }
