"""What the share group handlers (KIP-932) share: whether share groups are on (the finalized
`share.version`, as Kafka 4.1 decides), a group's effective settings, the partitions a request
names (by topic id, with READ on each topic), the member's connection, and leader redirects."""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.handlers._redirects import node_endpoints
from moldau.broker.registry import RequestContext
from moldau.config.share_groups import ShareGroupSettings
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from moldau.share.manager import ShareFetchPartition, SharePartitionManager
from moldau.types import TopicPartition

SHARE_VERSION = "share.version"
DISABLED = (
    "Share groups are not enabled on this cluster: finalize share.version 1 "
    "(kafka-features.sh upgrade --feature share.version=1)"
)
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}
_CONNECTION_TOKEN = "share_connection"


def share_groups_enabled(ctx: RequestContext) -> bool:
    return ctx.node.metadata_image.features.get(SHARE_VERSION, 0) >= 1


def refusal(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    """Why a ShareFetch or ShareAcknowledge is refused as a whole, or None: share groups off,
    no group or member id, or no READ on the group."""
    if not share_groups_enabled(ctx) or ctx.node.share_partitions is None:
        return ErrorCode.unsupported_version, DISABLED
    if not request.group_id or not request.member_id:
        return ErrorCode.invalid_request, "GroupId and MemberId must be set"
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed, None
    return None


def group_settings(ctx: RequestContext, group_id: str) -> ShareGroupSettings:
    node = ctx.node
    configs = node.metadata_image.group_configs.get(group_id, {})
    return ShareGroupSettings.of(configs, node.share_group_config)


def share_partition(
    ctx: RequestContext, topic_id: uuid.UUID, partition: int
) -> ShareFetchPartition:
    """A partition a request names, readable or with the error that says why it is not:
    TOPIC_AUTHORIZATION_FAILED without READ on the topic, UNKNOWN_TOPIC_ID for a topic id the
    metadata does not know (authorization first, as Kafka)."""
    topic = ctx.node.metadata_image.topics_by_id.get(topic_id)
    if topic is not None and not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name):
        return ShareFetchPartition(topic_id, partition, None, ErrorCode.topic_authorization_failed)
    if topic is None:
        return ShareFetchPartition(topic_id, partition, None, ErrorCode.unknown_topic_id)
    if partition not in topic.partitions:
        return ShareFetchPartition(topic_id, partition, None, ErrorCode.unknown_topic_or_partition)
    return ShareFetchPartition(topic_id, partition, TopicPartition(topic.name, partition))


def leader_in(image: MetadataImage, tp: TopicPartition) -> tuple[int, int] | None:
    """(leader, leader epoch) of a partition the metadata knows."""
    topic = image.topics.get(tp.topic)
    known = topic.partitions.get(tp.partition) if topic is not None else None
    return (known.leader, known.leader_epoch) if known is not None else None


def wire_leader(leader: tuple[int, int] | None) -> dict[str, int]:
    if leader is None:
        return dict(NO_LEADER)
    return {"leader_id": leader[0], "leader_epoch": leader[1]}


def endpoints_of(ctx: RequestContext, leaders: set[int]) -> list[dict[str, Any]]:
    """The node endpoints of the leaders an answer names (KIP-951)."""
    leaders.discard(-1)
    if not leaders:
        return []
    return [
        {
            "node_id": broker["node_id"],
            "host": broker["host"],
            "port": broker["port"],
            "rack": broker["rack"],
        }
        for broker in node_endpoints(ctx, leaders)
    ]


def connection_token(ctx: RequestContext, manager: SharePartitionManager) -> object:
    """What names the request's connection to the share sessions; the first share request of
    a connection arranges for its sessions to close with it."""
    extras = ctx.extras
    token = extras.get(_CONNECTION_TOKEN)
    if token is None:
        token = extras[_CONNECTION_TOKEN] = object()
        ctx.connection.on_close.append(lambda: manager.connection_closed(token))
    return token
