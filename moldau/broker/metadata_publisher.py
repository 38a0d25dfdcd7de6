"""Turns each new metadata image into partition roles on this broker (Kafka's BrokerMetadataPublisher).

For every partition that lists this node as a replica it makes the replica manager host it as
leader or follower with the topic's effective log config; partitions of deleted topics are
stopped and their logs deleted; config changes reach the logs. Diffing whole images keeps this
correct whatever records produced them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from moldau.metadata.image import MetadataImage
from moldau.replication.replica_manager import PartitionState
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.node import Node

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"


class MetadataPublisher:
    def __init__(self, node: Node) -> None:
        self._node = node
        self._previous: MetadataImage | None = None
        self.listeners: list[Any] = []

    def publish(self, delta: Any, image: MetadataImage) -> None:
        node = self._node
        previous = self._previous
        replica_manager = node.replica_manager
        broker_configs_changed = (
            previous is None or previous.broker_configs is not image.broker_configs
        )
        if broker_configs_changed:
            overrides = image.broker_config_overrides(node.node_id)
            removed = (
                set(previous.broker_config_overrides(node.node_id)) - set(overrides)
                if previous is not None
                else set()
            )
            for name in removed:
                node.config.set_dynamic(name, None)
            for name, value in overrides.items():
                try:
                    node.config.set_dynamic(name, value)
                except ValueError:
                    log.warning("ignoring dynamic broker config %s=%r", name, value)
        for name, topic in image.topics.items():
            old_topic = previous.topics.get(name) if previous is not None else None
            if old_topic is topic:
                if broker_configs_changed:  # cluster-wide or per-broker defaults reach every log
                    self._update_configs(topic)
                continue
            if old_topic is not None and old_topic.topic_id != topic.topic_id:
                self._remove_topic(old_topic)
            config = node.log_config_for(topic.configs)
            for index, partition in topic.partitions.items():
                if node.node_id not in partition.replicas:
                    continue
                replica_manager.become_leader_or_follower(
                    TopicPartition(name, index),
                    PartitionState(
                        topic_id=topic.topic_id,
                        leader=partition.leader,
                        leader_epoch=partition.leader_epoch,
                        partition_epoch=partition.partition_epoch,
                        replicas=partition.replicas,
                        isr=partition.isr,
                    ),
                    config,
                )
        if previous is not None:
            for name, old_topic in previous.topics.items():
                if name not in image.topics:
                    self._remove_topic(old_topic)
        # Logs on disk for topics the metadata no longer has (deleted while we were down).
        if previous is None and node.log_manager is not None:
            for partition_log in list(node.log_manager.logs()):
                tp = partition_log.topic_partition
                if tp.topic == METADATA_TOPIC:
                    continue  # the metadata log lives beside the partitions; never a stray
                topic = image.topics.get(tp.topic)
                if topic is None or tp.partition not in topic.partitions:
                    log.info("deleting stray log %s", tp)
                    node.log_manager.delete_log(tp)
        self._previous = image
        for listener in self.listeners:
            listener(previous, image)

    def _update_configs(self, topic: Any) -> None:
        """Re-derive the log config of this broker's replicas of `topic` (its own configs over
        the broker's, dynamic ones included), as Kafka does when a broker default changes."""
        node = self._node
        config = node.log_config_for(topic.configs)
        for index, partition in topic.partitions.items():
            if node.node_id in partition.replicas:
                node.replica_manager.update_config(TopicPartition(topic.name, index), config)

    def _remove_topic(self, topic: Any) -> None:
        for index in topic.partitions:
            self._node.replica_manager.stop_replica(TopicPartition(topic.name, index), delete=True)
