"""The metadata publisher creates and deletes logs in a worker thread, in order, and attaches
each created log to the image current by then: large topics do not stop the loop, deleted or
recreated topics leave no stray logs, and a log that cannot be created leaves its partition
offline (KAFKA_STORAGE_ERROR) until its directory is back."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from moldau.broker.client_telemetry import ClientTelemetry
from moldau.broker.metadata_publisher import MetadataPublisher
from moldau.clock import ManualClock
from moldau.config.values import BrokerConfig
from moldau.controller.core import ControllerCore
from moldau.controller.operations import BrokerRegistration, NewTopic
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import BrokerEndpoint
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage import LogConfig, LogManager, MemoryFileSystem
from moldau.types import TopicPartition

SMALL_INDEXES = LogConfig(segment_index_bytes=4096)  # in-memory files are preallocated for real


class _Node:
    """What the publisher reads from the composition root."""

    def __init__(self, filesystem: MemoryFileSystem) -> None:
        self.node_id = 1
        self.config = BrokerConfig({"max.broker.partitions": "100000"})
        self.core = ControllerCore(config=self.config)
        records, _ = self.core.register_broker(
            BrokerRegistration(
                broker_id=1,
                incarnation_id=uuid.uuid4(),
                endpoints=[BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092)],
            )
        )
        self.core.replay(records, offset=len(records))
        self.log_manager = LogManager(
            ["/data"], fs=filesystem, clock=ManualClock(), default_config=SMALL_INDEXES
        )
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(self.log_manager, node_id=1)
        self.client_telemetry = ClientTelemetry(ManualClock())
        self.hosted: list[TopicPartition] = []

    @property
    def metadata_image(self) -> MetadataImage:
        return self.core.image

    def log_config_for(self, configs: Any) -> LogConfig:
        return SMALL_INDEXES

    def on_partition_hosted(self, tp: TopicPartition) -> None:
        self.hosted.append(tp)

    def apply(self, operation: Any) -> None:
        records, results = operation
        assert all(r.error_code == ErrorCode.none for r in results), results
        self.core.replay(records, offset=self.core.image.offset + len(records))


def run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


def hosted(node: _Node, topic: str) -> list[int]:
    return sorted(tp.partition for tp in node.replica_manager.partitions if tp.topic == topic)


def logs(node: _Node, topic: str) -> list[int]:
    return sorted(
        log.topic_partition.partition
        for log in node.log_manager.logs()
        if log.topic_partition.topic == topic
    )


def test_a_large_topic_is_created_in_chunks_while_the_loop_keeps_running() -> None:
    async def scenario() -> None:
        node = _Node(MemoryFileSystem())
        publisher = MetadataPublisher(node)  # type: ignore[arg-type]
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.create_topics([NewTopic(name="wide", num_partitions=300)]))
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.get_running_loop().create_task(ticker())
        publisher.publish(None, node.metadata_image)
        assert hosted(node, "wide") == []  # nothing done on the loop in publish
        assert await publisher.settled(["wide"], timeout_s=30)
        ticking.cancel()
        assert hosted(node, "wide") == list(range(300))
        assert ticks > 3  # the loop ran between chunks of 64
        assert len(node.hosted) == 300

    run(scenario)


def test_a_topic_deleted_or_recreated_while_its_logs_are_made_leaves_no_stray_log() -> None:
    async def scenario() -> None:
        node = _Node(MemoryFileSystem())
        publisher = MetadataPublisher(node)  # type: ignore[arg-type]
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.create_topics([NewTopic(name="gone", num_partitions=100)]))
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.delete_topics(["gone"]))
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.create_topics([NewTopic(name="again", num_partitions=3)]))
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.delete_topics(["again"]))
        publisher.publish(None, node.metadata_image)
        node.apply(node.core.create_topics([NewTopic(name="again", num_partitions=2)]))
        publisher.publish(None, node.metadata_image)
        assert await publisher.settled(["gone", "again"], timeout_s=30)
        assert hosted(node, "gone") == [] and logs(node, "gone") == []
        assert hosted(node, "again") == [0, 1] and logs(node, "again") == [0, 1]
        topic_id = node.metadata_image.topics["again"].topic_id
        for index in (0, 1):
            partition = node.replica_manager.get_partition(TopicPartition("again", index))
            assert partition is not None and partition.topic_id == topic_id

    run(scenario)


def test_a_log_that_cannot_be_created_is_offline_until_its_directory_has_room() -> None:
    async def scenario() -> None:
        filesystem = MemoryFileSystem()
        node = _Node(filesystem)
        publisher = MetadataPublisher(node)  # type: ignore[arg-type]
        publisher.publish(None, node.metadata_image)
        filesystem.capacity_bytes = filesystem.used_bytes()  # the disk is full
        node.apply(node.core.create_topics([NewTopic(name="late", num_partitions=2)]))
        publisher.publish(None, node.metadata_image)
        assert await publisher.settled(["late"], timeout_s=30)
        tp = TopicPartition("late", 0)
        with pytest.raises(KafkaError) as offline:
            node.replica_manager.leader_partition(tp)
        assert offline.value.code == ErrorCode.kafka_storage_error
        filesystem.capacity_bytes = None
        assert node.log_manager.recheck_log_dirs() == ["/data"]
        publisher.retry_offline("/data")
        assert await publisher.settled(["late"], timeout_s=30)
        assert node.replica_manager.leader_partition(tp).log.log_end_offset == 0
        assert node.replica_manager.offline_partitions == {}

    run(scenario)
