"""OffsetCommit (key 8), v2-10: store consumed positions for a group.

v2-4 carry retention_time (ignored since Kafka 2.1: retention follows the group, KIP-211); v3
throttle time; v5 drops retention_time; v6 committed_leader_epoch; v7 group_instance_id; v8
flexible; v9 reads generation_id_or_member_epoch as a KIP-848 member epoch for consumer groups;
v10 names topics by topic_id. Errors are per partition; a commit for a topic or partition that
does not exist answers UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id), as Kafka does.

The principal needs READ on the group (else every partition answers GROUP_AUTHORIZATION_FAILED)
and READ on each topic (TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.offsets import PartitionCommit
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError


@handler(ApiKey.OFFSET_COMMIT, 2, 10)
async def handle_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.node.metadata_image
    by_id = ctx.api_version >= 10
    commits: list[PartitionCommit] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    order: list[tuple[Any, str, list[int]]] = []  # (wire topic key, name, partitions)
    may_read_group = ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id)
    for topic in request.topics:
        if by_id:
            found = image.topics_by_id.get(topic.topic_id)
            name = found.name if found is not None else str(topic.topic_id)
            missing_code = ErrorCode.unknown_topic_id
        else:
            found = image.topics.get(topic.name)
            name = topic.name
            missing_code = ErrorCode.unknown_topic_or_partition
        refusal = None  # (an unknown topic id has no name to authorize)
        if not may_read_group:
            refusal = ErrorCode.group_authorization_failed
        elif (found is not None or not by_id) and not ctx.authorized(
            AclOperation.READ, ResourceType.TOPIC, name
        ):
            refusal = ErrorCode.topic_authorization_failed
        indexes = []
        for partition in topic.partitions:
            index = partition.partition_index
            indexes.append(index)
            code = refusal
            if code is None and (found is None or index not in found.partitions):
                code = missing_code
            if code is not None:
                refused[(name, index)] = code
                continue
            commits.append(
                PartitionCommit(
                    topic=name,
                    partition=index,
                    offset=partition.committed_offset,
                    leader_epoch=getattr(partition, "committed_leader_epoch", -1),
                    metadata=partition.committed_metadata,
                )
            )
        order.append((topic.topic_id if by_id else topic.name, name, indexes))
    codes: dict[tuple[str, int], ErrorCode] = dict(refused)
    runtime = ctx.node.group_coordinator
    try:
        if runtime is None:
            raise KafkaError(ErrorCode.coordinator_not_available)
        if commits:
            response = await runtime.commit_offsets(
                group_id=request.group_id,
                generation_id=request.generation_id_or_member_epoch,
                member_id=request.member_id,
                group_instance_id=getattr(request, "group_instance_id", None),
                commits=commits,
            )
            for topic in response["topics"]:
                for partition in topic["partitions"]:
                    codes[(topic["name"], partition["partition_index"])] = partition["error_code"]
    except KafkaError as error:
        for commit in commits:
            codes[(commit.topic, commit.partition)] = error.code
    topics = []
    for key, name, indexes in order:
        partitions = [
            {"partition_index": index, "error_code": codes.get((name, index), ErrorCode.none)}
            for index in indexes
        ]
        topics.append(
            {
                "name": name,
                "topic_id": key if by_id else None,
                "partitions": partitions,
            }
        )
    return {"throttle_time": 0, "topics": topics}
