"""What the console's forms change on the cluster: create a topic, set a topic config, reset a
group's committed offsets.

Values arrive already validated (`validation.py`); what only the cluster can judge (a name
taken, a replication factor above the broker count, an ACL) comes back as its `KafkaException`.
An offset reset follows kafka-consumer-groups.sh: the group must have no active members, an
offset is clamped into the partition's [log start, log end], and a time after the last record
moves to the log end.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.offsets import EARLIEST, LATEST
from moldau.console.model import ResetRequest
from moldau.console.validation import InvalidInput
from moldau.types import TopicPartition

__all__ = ["create_topic", "reset_offsets", "set_topic_config"]


async def create_topic(
    admin: AdminClient,
    *,
    name: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: Mapping[str, str],
) -> None:
    """Create the topic (None: the broker's default partition count or replication factor)."""
    await admin.create_topics(
        [
            NewTopic(
                name,
                num_partitions=-1 if partitions is None else partitions,
                replication_factor=-1 if replication_factor is None else replication_factor,
                config=dict(configs),
            )
        ]
    )


async def set_topic_config(admin: AdminClient, topic: str, name: str, value: str) -> None:
    await admin.incremental_alter_configs(
        ConfigResource(ResourceType.TOPIC, topic), [(name, AlterConfigOp.SET, value)]
    )


async def reset_offsets(admin: AdminClient, request: ResetRequest) -> dict[TopicPartition, int]:
    """Commit the new offsets for the group; returns them."""
    [description] = await admin.describe_groups([request.group_id])
    if description.members:
        count = len(description.members)
        raise KafkaException(
            ErrorCode.non_empty_group,
            f"group '{request.group_id}' has {count} active member{'s' if count > 1 else ''}: "
            "stop its consumers before resetting its offsets",
        )
    topic = await admin.describe_topic(request.topic)
    if request.partition is not None and request.partition not in topic.partitions:
        raise InvalidInput(
            "partition",
            f"topic {request.topic} has partitions 0 to {len(topic.partitions) - 1}",
        )
    numbers = list(topic.partitions) if request.partition is None else [request.partition]
    partitions = [TopicPartition(request.topic, p) for p in numbers]
    earliest = await admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
    latest = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
    target = request.target
    offsets: dict[TopicPartition, int] = {}
    if target.kind == "timestamp":
        assert target.value is not None
        found = await admin.list_offsets(dict.fromkeys(partitions, target.value))
        for tp in partitions:
            offset = found[tp].offset
            offsets[tp] = latest[tp].offset if offset < 0 else offset
    else:
        for tp in partitions:
            low, high = earliest[tp].offset, latest[tp].offset
            if target.kind == "earliest":
                offsets[tp] = low
            elif target.kind == "latest":
                offsets[tp] = high
            else:
                assert target.value is not None
                offsets[tp] = min(max(target.value, low), high)
    await admin.alter_consumer_group_offsets(request.group_id, offsets)
    return offsets
