"""CreateTopics (key 19), v2-7: create topics through the controller (a record in the metadata log).

v2-4 are v1 (throttling behaviour changes); v5 is flexible and answers with the partition count,
replication factor and effective configs of each topic (also for validate_only); v6 may answer
THROTTLING_QUOTA_EXCEEDED (never here); v7 adds the topic id. num_partitions and
replication_factor -1 mean the broker's `num.partitions` and `default.replication.factor`;
manual assignments replace both. Errors are per topic: INVALID_TOPIC_EXCEPTION,
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, POLICY_VIOLATION (more than 10,000 partitions in
the request, or above `max.partitions` / `max.broker.partitions`), KAFKA_STORAGE_ERROR (no room
left for the metadata log). The answer waits for this broker to create the logs (in a worker
thread, while it serves others; at most LOG_CREATION_WAIT_S, whatever the request's timeout: a
client may read a topic as soon as it is told it exists).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.handlers._authorized import for_authorized
from moldau.broker.registry import RequestContext, handler
from moldau.config.definitions import TOPIC_KEYS
from moldau.controller.config_description import describe_topic_config
from moldau.controller.operations import CreateTopicResult, NewTopic
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

LOG_CREATION_WAIT_S = 60.0


@handler(ApiKey.CREATE_TOPICS, 2, 7, forward=True)
async def handle_create_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    new_topics = [
        NewTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments},
            configs={c.name: c.value for c in topic.configs},
        )
        for topic in request.topics
    ]
    # CREATE on the cluster covers every topic; otherwise each needs CREATE of its own.
    any_topic = ctx.authorized_cluster(AclOperation.CREATE)

    def allowed(topic: NewTopic) -> bool:
        return any_topic or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, topic.name)

    async def create(topics: list[NewTopic]) -> list[CreateTopicResult]:
        try:
            return list(
                await ctx.controller.create_topics(
                    topics, validate_only=bool(request.validate_only)
                )
            )
        except KafkaError as error:  # NOT_CONTROLLER (leadership moved meanwhile): clients retry
            return [
                CreateTopicResult(name=t.name, error_code=error.code, error_message=str(error))
                for t in topics
            ]

    results = await for_authorized(new_topics, allowed, create, _refused)
    created = [r.name for r in results if r.error_code == ErrorCode.none]
    if created and not request.validate_only and ctx.node.layout.is_broker:
        await ctx.node.wait_for_partitions(created, timeout_s=LOG_CREATION_WAIT_S)
    return {"throttle_time": 0, "topics": [_topic_result(ctx, r) for r in results]}


def _refused(topic: NewTopic) -> CreateTopicResult:
    return CreateTopicResult(
        name=topic.name,
        error_code=ErrorCode.topic_authorization_failed,
        error_message="Authorization failed.",
    )


def _topic_result(ctx: RequestContext, result: CreateTopicResult) -> dict[str, Any]:
    response: dict[str, Any] = {
        "name": result.name,
        "topic_id": result.topic_id,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "topic_config_error_code": 0,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }
    if result.error_code != ErrorCode.none:
        return response
    node = ctx.node
    response["num_partitions"] = result.num_partitions
    response["replication_factor"] = result.replication_factor
    if not ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, result.name):
        response["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        return response
    configs = []
    for name in sorted(TOPIC_KEYS):
        described = describe_topic_config(
            node.metadata_image, node.config, name, result.configs, node_id=node.node_id
        )
        configs.append(
            {
                "name": described.name,
                "value": described.value,
                "read_only": described.read_only,
                "config_source": described.source.value,
                "is_sensitive": described.is_sensitive,
            }
        )
    response["configs"] = configs
    return response
