"""Share group (KIP-932) helpers shared by the tests: a topic with a group that starts at its
earliest offset, producing, a group's members, and what a group could hand out now."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from . import rdkafka
from .support import unique_topic
from .wire import Connection


def share_topic(server: Any, *, lock_ms: int | None = None) -> tuple[str, str]:
    """A new one-partition topic and a group starting at its earliest offset."""
    topic, group = unique_topic("queue"), unique_topic("workers")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    configs = [("share.auto.offset.reset", "earliest")]
    if lock_ms is not None:
        configs.append(("share.record.lock.duration.ms", str(lock_ms)))
    admin = rdkafka.admin_client(server.bootstrap_servers)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    return topic, group


def produce(server: Any, topic: str, values: list[str], *, batches: int = 1) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "linger.ms": 0})
    size = -(-len(values) // batches)
    for start in range(0, len(values), size):
        for value in values[start : start + size]:
            producer.produce(topic, value=value.encode())
        assert producer.flush(30) == 0
        if batches > 1:
            time.sleep(0.05)


def members_of(server: Any, group: str) -> list[Any]:
    with Connection(server.host, server.port) as wire:
        answer = wire.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return list(answer.groups[0].members)


def available(server: Any, group: str, topic: str) -> list[int]:
    """The offsets of `topic` the group could hand out now: a probe member's ShareFetch,
    waiting half a second (its session closes, and what it took is released, with the
    connection)."""
    with Connection(server.host, server.port) as wire:
        metadata = wire.request(
            3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
        topic_id = metadata.topics[0].topic_id
        answer = wire.request(
            78,
            1,
            {
                "group_id": group,
                "member_id": uuid.uuid4().hex,
                "share_session_epoch": 0,
                "max_wait": 500,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "max_records": 500,
                "batch_size": 500,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
                "forgotten_topics_data": [],
            },
        )
    assert answer.error_code == 0, answer
    return [
        offset
        for response in answer.responses
        for partition in response.partitions
        for run in partition.acquired_records
        for offset in range(run.first_offset, run.last_offset + 1)
    ]
