"""DeleteRecords (key 21), v0-2: advance a partition's log start offset (the low watermark).

v1 is v0 (throttling change); v2 is flexible. An offset of -1 means the high watermark. An
offset past the high watermark is OFFSET_OUT_OF_RANGE. The leader advances its own log start at
once; the answer waits, up to the request's `timeout`, until every replica on a live broker
has advanced its own (followers do on their next fetch) and carries that low watermark, as
Kafka's delayed delete-records does; past the timeout the partition is REQUEST_TIMED_OUT.
The internal topics' records are the coordinators' own: INVALID_TOPIC_EXCEPTION, as Kafka
answers, unless `internal.topics.modification.enable`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.topic_names import (
    INTERNAL_TOPICS,
    INTERNAL_TOPICS_MODIFICATION,
    refuse_internal_topic_change,
)
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    answers: list[tuple[str, dict[str, Any], asyncio.Future[int] | None]] = []
    for topic in request.topics:
        for requested in topic.partitions:
            response: dict[str, Any] = {
                "partition_index": requested.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.none,
            }
            waiting: asyncio.Future[int] | None = None
            try:
                tp = TopicPartition(topic.name, requested.partition_index)
                ctx.require(
                    AclOperation.DELETE,
                    ResourceType.TOPIC,
                    topic.name,
                    ErrorCode.topic_authorization_failed,
                )
                if topic.name in INTERNAL_TOPICS and not ctx.node.config.get(
                    INTERNAL_TOPICS_MODIFICATION
                ):  # Kafka refuses it with the same code
                    raise refuse_internal_topic_change(
                        topic.name, "delete records of", ErrorCode.invalid_topic_exception
                    )
                waiting = replica_manager.delete_records(tp, requested.offset)
            except KafkaError as exc:
                response["error_code"] = exc.code
            answers.append((topic.name, response, waiting))
    futures = [waiting for _, _, waiting in answers if waiting is not None]
    if futures:
        await asyncio.wait(futures, timeout=max(request.timeout.total_seconds(), 0.0))
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, response, waiting in answers:
        if waiting is not None:
            if not waiting.done():
                waiting.cancel()
                response["error_code"] = ErrorCode.request_timed_out
            elif isinstance(waiting.exception(), KafkaError):
                response["error_code"] = waiting.exception().code  # type: ignore[union-attr]
            elif waiting.exception() is not None:
                response["error_code"] = ErrorCode.unknown_server_error
            else:
                response["low_watermark"] = waiting.result()
        topics.setdefault(name, []).append(response)
    return {
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
    }
