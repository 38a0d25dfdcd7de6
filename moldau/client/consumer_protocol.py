"""The "consumer" embedded protocol of classic groups and the range assignor.

Kafka's `ConsumerProtocol`: JoinGroup member metadata is an int16 version followed by a
`ConsumerProtocolSubscription` of that version; SyncGroup assignments are an int16 version followed
by a `ConsumerProtocolAssignment`. Newer versions only append fields, so a reader decodes any
version with the newest schema it knows. `assign_range` mirrors Kafka's `RangeAssignor`.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v3.data import (
    ConsumerProtocolAssignment as AssignmentV3,
)
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as SubscriptionV1,
)
from kio.schema.consumer_protocol_subscription.v2.data import (
    ConsumerProtocolSubscription as SubscriptionV2,
)
from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription as SubscriptionV3,
)
from kio.serial import entity_reader, entity_writer

from moldau.protocol.adapter import build_entity
from moldau.types import TopicPartition

__all__ = [
    "RANGE",
    "Subscription",
    "assign_range",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

RANGE: Final = "range"
PROTOCOL_TYPE: Final = "consumer"
_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS: Final = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None


def _write(version: int, cls: type[Any], data: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(version))
    entity_writer(cls)(buffer, build_entity(cls, data))
    return buffer.getvalue()


def encode_subscription(topics: Sequence[str], user_data: bytes | None = None) -> bytes:
    return _write(0, SubscriptionV0, {"topics": sorted(topics), "user_data": user_data})


def decode_subscription(data: bytes) -> Subscription:
    (version,) = _VERSION.unpack_from(data, 0)
    cls = _SUBSCRIPTIONS[min(max(version, 0), len(_SUBSCRIPTIONS) - 1)]
    value: Any
    value, _ = entity_reader(cls)(data, _VERSION.size)
    return Subscription(tuple(value.topics), value.user_data)


def encode_assignment(partitions: Sequence[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return _write(
        0,
        AssignmentV0,
        {
            "assigned_partitions": [
                {"topic": topic, "partitions": parts} for topic, parts in by_topic.items()
            ],
            "user_data": None,
        },
    )


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """The partitions of an assignment (an empty or missing assignment means none)."""
    if not data or len(data) < _VERSION.size:
        return []
    (version,) = _VERSION.unpack_from(data, 0)
    cls = AssignmentV0 if version == 0 else AssignmentV3
    value: Any
    value, _ = entity_reader(cls)(data, _VERSION.size)
    return [
        TopicPartition(t.topic, int(p)) for t in value.assigned_partitions for p in t.partitions
    ]


def assign_range(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, members sorted by id take contiguous ranges; the first
    `partitions % members` members get one extra partition."""
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    topics = sorted({topic for topics in subscriptions.values() for topic in topics})
    for topic in topics:
        count = partition_counts.get(topic)
        if not count:
            continue
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        per_member, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            length = per_member + (1 if index < extra else 0)
            assignment[member].extend(
                TopicPartition(topic, p) for p in range(start, start + length)
            )
            start += length
    return assignment
