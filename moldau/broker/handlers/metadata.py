"""Metadata (key 3), v0-13: brokers, cluster id, controller and topic partitions.

v1 adds rack, controller id and is_internal; v2 cluster id; v4 allow_auto_topic_creation; v5
offline replicas; v7 leader epoch; v8 authorized operations; v9 flexible; v10 topic ids; v11
drops cluster authorized operations; v12 allows topic ids as the key of a request; v13 adds a
top-level error code. A null topic list means all topics (an empty list, none; v0 used empty for
all). Unknown topics are created when `auto.create.topics.enable` and the client allow it.

Under an authorizer a principal sees the topics it may DESCRIBE; a named one it may not is
answered TOPIC_AUTHORIZATION_FAILED, and auto-creation needs CREATE on the cluster or topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

_ZERO_UUID = uuid.UUID(int=0)
OMITTED = -(2**31)  # authorized operations not asked for


@handler(ApiKey.METADATA, 0, 13)
async def handle_metadata(ctx: RequestContext, request: Any) -> dict[str, Any]:
    node = ctx.node
    image = node.metadata_image
    requested = request.topics
    if ctx.api_version == 0 and requested is not None and len(requested) == 0:
        requested = None
    names: list[str | None]
    if requested is None:  # every topic the principal may describe
        names = [
            name
            for name in sorted(image.topics)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        ]
    else:
        names = []
        for topic in requested:
            name = getattr(topic, "name", None)
            topic_id = getattr(topic, "topic_id", None)
            if name is None and topic_id is not None and topic_id != _ZERO_UUID:
                found = image.topics_by_id.get(topic_id)
                names.append(found.name if found is not None else None)
            else:
                names.append(name)
    allow_auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
    # Authorization comes before existence: a topic the principal may not describe is
    # answered TOPIC_AUTHORIZATION_FAILED whether or not it exists, and one it may describe
    # but not create is not created.
    denied = {
        name
        for name in names
        if name is not None
        and requested is not None
        and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    }
    missing = [n for n in names if n is not None and n not in image.topics and n not in denied]
    created_errors: dict[str, ErrorCode] = {}
    if missing and requested is not None and allow_auto_create and node.auto_create_topics:
        may_create = ctx.authorized_cluster(AclOperation.CREATE)
        creatable = []
        for name in missing:
            if may_create or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name):
                creatable.append(name)
            else:
                created_errors[name] = ErrorCode.topic_authorization_failed
        if creatable:
            created_errors.update(await node.auto_create_topics_for_metadata(creatable))
            image = node.metadata_image
    with_operations = bool(getattr(request, "include_topic_authorized_operations", False))
    topics = []
    for index, name in enumerate(names):
        if name is None:
            topic_id = getattr(requested[index], "topic_id", None) if requested else None
            if ctx.api_version < 12:  # ids as keys came with v12; names are not nullable before
                topics.append({"error_code": ErrorCode.invalid_request, "name": ""})
                continue
            topics.append(
                {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id}
            )
            continue
        topic = image.topics.get(name)
        if name in denied:
            topics.append(
                {
                    "error_code": ErrorCode.topic_authorization_failed,
                    "name": name,
                    "topic_id": _ZERO_UUID,
                }
            )
            continue
        if topic is None:
            code = created_errors.get(name, ErrorCode.unknown_topic_or_partition)
            topics.append({"error_code": code, "name": name, "topic_id": _ZERO_UUID})
            continue
        partitions = []
        for partition_index in sorted(topic.partitions):
            partition = topic.partitions[partition_index]
            live = [r for r in partition.replicas if node.is_broker_alive(r)]
            partitions.append(
                {
                    "error_code": (
                        ErrorCode.none if partition.leader >= 0 else ErrorCode.leader_not_available
                    ),
                    "partition_index": partition_index,
                    "leader_id": partition.leader,
                    "leader_epoch": partition.leader_epoch,
                    "replica_nodes": list(partition.replicas),
                    "isr_nodes": list(partition.isr),
                    "offline_replicas": [r for r in partition.replicas if r not in live],
                }
            )
        topics.append(
            {
                "error_code": ErrorCode.none,
                "name": name,
                "topic_id": topic.topic_id,
                "is_internal": name.startswith("__"),
                "partitions": partitions,
                "topic_authorized_operations": (
                    ctx.authorized_operations(ResourceType.TOPIC, name)
                    if with_operations
                    else OMITTED
                ),
            }
        )
    cluster_operations = OMITTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return {
        "throttle_time": 0,
        "brokers": node.broker_endpoints(ctx.listener_name),
        "cluster_id": image.cluster_id,
        "controller_id": node.controller_id,
        "topics": topics,
        "error_code": ErrorCode.none,
        "cluster_authorized_operations": cluster_operations,
    }
