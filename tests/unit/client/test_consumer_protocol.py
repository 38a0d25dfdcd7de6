"""The consumer protocol's subscription/assignment bytes and Kafka's range assignor."""

from __future__ import annotations

import io
import struct

from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.serial import entity_writer

from moldau.client.consumer_protocol import (
    assign_range,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from moldau.protocol.adapter import build_entity
from moldau.types import TopicPartition as TP


def test_subscription_round_trips_with_version_zero_prefix() -> None:
    data = encode_subscription(["b", "a"], b"user")
    assert data[:2] == b"\x00\x00"
    decoded = decode_subscription(data)
    assert decoded.topics == ("a", "b")
    assert decoded.user_data == b"user"


def test_newer_subscription_versions_are_readable() -> None:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity = build_entity(
        ConsumerProtocolSubscription,
        {
            "topics": ["t"],
            "user_data": None,
            "owned_partitions": [{"topic": "t", "partitions": [0]}],
        },
    )
    entity_writer(ConsumerProtocolSubscription)(buffer, entity)
    assert decode_subscription(buffer.getvalue()).topics == ("t",)


def test_assignment_round_trips_sorted_by_topic_and_partition() -> None:
    partitions = [TP("b", 1), TP("a", 2), TP("a", 0)]
    assert decode_assignment(encode_assignment(partitions)) == [TP("a", 0), TP("a", 2), TP("b", 1)]


def test_empty_assignment_means_no_partitions() -> None:
    assert decode_assignment(b"") == []
    assert decode_assignment(None) == []


def test_range_gives_the_first_members_the_extra_partitions() -> None:
    plan = assign_range({"m2": ["t"], "m1": ["t"]}, {"t": 3})
    assert plan == {"m1": [TP("t", 0), TP("t", 1)], "m2": [TP("t", 2)]}


def test_range_assigns_each_topic_independently() -> None:
    # Kafka's RangeAssignor example: two consumers, two topics of three partitions.
    plan = assign_range({"c0": ["t0", "t1"], "c1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert plan["c0"] == [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)]
    assert plan["c1"] == [TP("t0", 2), TP("t1", 2)]


def test_range_only_counts_subscribed_members_and_known_topics() -> None:
    plan = assign_range({"a": ["x"], "b": ["y"], "c": ["x", "missing"]}, {"x": 4, "y": 1})
    assert plan == {
        "a": [TP("x", 0), TP("x", 1)],
        "b": [TP("y", 0)],
        "c": [TP("x", 2), TP("x", 3)],
    }


def test_range_leaves_extra_members_without_partitions() -> None:
    plan = assign_range({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2})
    assert plan == {"a": [TP("t", 0)], "b": [TP("t", 1)], "c": []}
