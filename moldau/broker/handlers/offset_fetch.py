"""OffsetFetch (key 9), v1-10: the committed offsets of a group.

v1 names topics; v2 allows topics null (= every committed offset) and adds a top-level
error_code; v3 throttle time; v5 committed_leader_epoch; v6 flexible; v7 require_stable; v8
batches groups (`groups` in and out, top-level fields gone); v9 member_id and member_epoch for
KIP-848 groups; v10 names topics by topic_id. A group or partition with nothing committed
answers offset -1 and no error, as Kafka does.

The principal needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and on each topic: a
topic it names without it answers TOPIC_AUTHORIZATION_FAILED per partition, and "every
committed offset" leaves such topics out, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


def _fetch_group(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool = False,
) -> dict[str, Any]:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {
            "group_id": group_id,
            "error_code": ErrorCode.group_authorization_failed,
            "topics": [],
        }
    image = ctx.node.metadata_image
    by_id = ctx.api_version >= 10
    wanted: list[tuple[str, list[int]]] | None = None
    denied: list[dict[str, Any]] = []  # topics named that the principal may not describe
    ids: dict[str, Any] = {}
    if topics is not None:
        wanted = []
        for topic in topics:
            if by_id:
                found = image.topics_by_id.get(topic.topic_id)
                name = found.name if found is not None else str(topic.topic_id)
                ids[name] = topic.topic_id
                named = found is not None  # (an unknown id has no name to authorize)
            else:
                name, named = topic.name, True
            if named and not _may_describe(ctx, name):
                denied.append(_denied_topic(name, topic.partition_indexes))
            else:
                wanted.append((name, list(topic.partition_indexes)))
    runtime = ctx.node.group_coordinator
    try:
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        answer: dict[str, Any] = runtime.fetch_offsets(
            group_id=group_id,
            topics=wanted,
            member_id=member_id,
            member_epoch=member_epoch,
            require_stable=require_stable,
        )
    except KafkaError as error:
        return {"group_id": group_id, "error_code": error.code, "topics": []}
    if topics is None:
        answer["topics"] = [
            topic for topic in answer["topics"] if _may_describe(ctx, topic["name"])
        ]
    elif answer["error_code"] == ErrorCode.none:
        answer["topics"] = [*answer["topics"], *denied]
    for topic in answer["topics"]:
        if by_id:
            known = image.topics.get(topic["name"])
            topic["topic_id"] = ids.get(topic["name"]) or (known.topic_id if known else None)
    return answer


def _may_describe(ctx: RequestContext, topic: str) -> bool:
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def _denied_topic(name: str, partitions: Any) -> dict[str, Any]:
    return {
        "name": name,
        "partitions": [
            {
                "partition_index": index,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": ErrorCode.topic_authorization_failed,
            }
            for index in partitions
        ],
    }


@handler(ApiKey.OFFSET_FETCH, 1, 10)
def handle_offset_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.api_version >= 8:
        groups = [
            _fetch_group(
                ctx,
                group.group_id,
                group.topics,
                getattr(group, "member_id", None),
                getattr(group, "member_epoch", -1),
                request.require_stable,
            )
            for group in request.groups
        ]
        return {"throttle_time": 0, "groups": groups}
    require_stable = getattr(request, "require_stable", False)
    answer = _fetch_group(ctx, request.group_id, request.topics, None, -1, require_stable)
    if ctx.api_version < 2 and answer["error_code"] != ErrorCode.none:
        for topic in answer["topics"]:  # v0-1 have no group-level error: put it on partitions
            for partition in topic["partitions"]:
                partition["error_code"] = answer["error_code"]
    return {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]}
