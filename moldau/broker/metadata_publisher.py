"""Turns each new metadata image into partition roles on this broker (Kafka's BrokerMetadataPublisher).

For every partition that lists this node as a replica it makes the replica manager host it as
leader or follower with the topic's effective log config; partitions of deleted topics are
stopped and their logs deleted, and so are replicas a reassignment moved to other brokers
(KIP-455); config changes reach the logs. Diffing whole images keeps this
correct whatever records produced them.

Creating and deleting a log is file work (directories, partition.metadata and the leader-epoch
checkpoint, each fsynced: ~3 ms a partition), so it is not done in `publish`, which runs on the
event loop: a CreateTopics of 10,000 partitions would stop the broker for half a minute. Such
work is queued, in order, and a worker applies it in a thread `_CHUNK` logs at a time; each
created log is attached on the loop against the image current by then (the topic may have been
deleted, or its leader changed, meanwhile). Until then a partition is not hosted here, as on a
Kafka broker that has not applied the metadata yet; `settled()` waits for the queue. A log that
cannot be created (its log dir is full or failed) leaves its partition offline
(KAFKA_STORAGE_ERROR) and is tried again when its log dir is back online (`retry_offline`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from moldau.metadata.image import MetadataImage, TopicImage
from moldau.replication.replica_manager import PartitionState
from moldau.storage import LogConfig, PartitionLog
from moldau.storage.checkpoints import topic_id_text
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
_CHUNK = 64  # logs created or deleted per trip to a worker thread
_CREATE, _DELETE = "create", "delete"


class MetadataPublisher:
    def __init__(self, node: BrokerServices) -> None:
        self._node = node
        self._previous: MetadataImage | None = None
        self.listeners: list[Any] = []
        self._work: deque[tuple[str, TopicPartition]] = deque()
        self._queued: Counter[TopicPartition] = Counter()  # queued or in flight
        self._worker: asyncio.Task[None] | None = None
        self._stopping = False
        self._progress = asyncio.Event()

    def publish(self, delta: Any, image: MetadataImage) -> None:
        node = self._node
        previous = self._previous
        broker_configs_changed = (
            previous is None or previous.broker_configs is not image.broker_configs
        )
        if broker_configs_changed:
            # This node's own dynamic configs and the cluster-wide defaults stay apart, so that
            # DescribeConfigs reports which of the two a value came from.
            for resource, cluster_default in ((str(node.node_id), False), ("", True)):
                overrides = image.broker_configs.get(resource, {})
                removed = (
                    set(previous.broker_configs.get(resource, {})) - set(overrides)
                    if previous is not None
                    else set()
                )
                for name in removed:
                    node.config.set_dynamic(name, None, cluster_default=cluster_default)
                for name, value in overrides.items():
                    try:
                        node.config.set_dynamic(name, value, cluster_default=cluster_default)
                    except ValueError:
                        log.warning("ignoring dynamic broker config %s=%r", name, value)
        if previous is None or previous.client_metrics is not image.client_metrics:
            node.client_telemetry.set_subscriptions(image.client_metrics)
        for name, topic in image.topics.items():
            old_topic = previous.topics.get(name) if previous is not None else None
            if old_topic is topic:
                if broker_configs_changed:  # cluster-wide or per-broker defaults reach every log
                    self._update_configs(topic)
                continue
            if old_topic is not None and old_topic.topic_id != topic.topic_id:
                self._remove_topic(old_topic)
            config = node.log_config_for(topic.configs)
            for index in topic.partitions:
                self._apply(TopicPartition(name, index), topic, config)
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
                current = image.topics.get(tp.topic)
                partition = current.partitions.get(tp.partition) if current else None
                if tp in self._queued:
                    continue  # (a replica moved away while this node was down: `_apply` saw it)
                if partition is None or node.node_id not in partition.replicas:
                    log.info("deleting stray log %s", tp)
                    self._enqueue(_DELETE, tp)
        self._previous = image
        for listener in self.listeners:
            listener(previous, image)

    def _update_configs(self, topic: TopicImage) -> None:
        """Re-derive the log config of this broker's replicas of `topic` (its own configs over
        the broker's, dynamic ones included), as Kafka does when a broker default changes."""
        node = self._node
        config = node.log_config_for(topic.configs)
        for index, partition in topic.partitions.items():
            if node.node_id in partition.replicas:
                node.replica_manager.update_config(TopicPartition(topic.name, index), config)

    def _apply(self, tp: TopicPartition, topic: TopicImage, config: LogConfig) -> None:
        """Host `tp` as the image says, now if its log is open, else once it is created."""
        node = self._node
        partition = topic.partitions[tp.partition]
        replica_manager = node.replica_manager
        if node.node_id not in partition.replicas:
            # A reassignment moved this replica away: stop it and delete its log (a creation
            # in flight is undone by `_attach`).
            if tp not in self._queued and self._hosts(tp):
                log.info("%s is no longer a replica here: deleting its log", tp)
                replica_manager.stop_replica(tp, delete=False)
                self._enqueue(_DELETE, tp)
            return
        if tp in self._queued or (
            replica_manager.get_partition(tp) is None
            and (node.log_manager is None or node.log_manager.get_log(tp) is None)
        ):
            self._enqueue(_CREATE, tp)
            return
        replica_manager.become_leader_or_follower(tp, _state(topic, tp), config)

    def _hosts(self, tp: TopicPartition) -> bool:
        """Whether `tp` has a replica here: hosted, offline or on disk."""
        node = self._node
        return (
            node.replica_manager.get_partition(tp) is not None
            or tp in node.replica_manager.offline_partitions
            or (node.log_manager is not None and node.log_manager.get_log(tp) is not None)
        )

    def _remove_topic(self, topic: TopicImage) -> None:
        for index in topic.partitions:
            tp = TopicPartition(topic.name, index)
            self._node.replica_manager.stop_replica(tp, delete=False)
            self._enqueue(_DELETE, tp)

    # -- the worker --

    def _enqueue(self, operation: str, tp: TopicPartition) -> None:
        self._work.append((operation, tp))
        self._queued[tp] += 1
        if self._worker is None and not self._stopping:
            self._worker = asyncio.get_running_loop().create_task(
                self._run(), name="metadata-publisher-logs"
            )

    def retry_offline(self, log_dir: str | None = None) -> None:
        """Try again to create the logs of offline partitions (of `log_dir`, or all)."""
        replica_manager = self._node.replica_manager
        log_manager = self._node.log_manager
        for tp in list(replica_manager.offline_partitions):
            if tp in self._queued:
                continue
            if (
                log_dir is None
                or log_manager is None
                or log_manager.log_dir_of(tp)
                in (
                    None,
                    log_dir,
                )
            ):
                self._enqueue(_CREATE, tp)

    def pending(self, topics: Iterable[str]) -> bool:
        """True while logs of `topics` wait to be created or deleted."""
        names = set(topics)
        return any(tp.topic in names for tp in self._queued)

    async def settled(self, topics: Iterable[str], timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until no log of `topics` waits to be created or deleted."""
        names = set(topics)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.pending(names):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._progress.wait(), remaining)
            except TimeoutError:
                return False
        return True

    async def stop(self) -> None:
        """Finish the chunk in flight (a worker thread cannot be interrupted); drop the rest:
        the next start creates what the metadata still asks for and deletes strays."""
        self._stopping = True
        worker = self._worker
        if worker is not None:
            await asyncio.wait([worker])

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._work and not self._stopping:
                chunk = [self._work.popleft() for _ in range(min(_CHUNK, len(self._work)))]
                jobs = [(operation, tp, self._creation(tp)) for operation, tp in chunk]
                outcomes = await loop.run_in_executor(None, self._apply_in_thread, jobs)
                for (operation, tp, _creation), outcome in zip(jobs, outcomes, strict=True):
                    self._queued[tp] -= 1
                    if self._queued[tp] <= 0:
                        del self._queued[tp]
                    if operation == _CREATE:
                        self._attach(tp, outcome)
                progress, self._progress = self._progress, asyncio.Event()
                progress.set()
        except Exception:
            log.exception("creating or deleting logs failed")
        finally:
            self._worker = None
            progress, self._progress = self._progress, asyncio.Event()
            progress.set()
            if self._work and not self._stopping:
                self._worker = loop.create_task(self._run(), name="metadata-publisher-logs")

    def _creation(self, tp: TopicPartition) -> tuple[LogConfig, object] | None:
        """(config, topic id) to create `tp`'s log with, from the current image; None if the
        partition is no longer hosted here."""
        topic = self._node.metadata_image.topics.get(tp.topic)
        partition = topic.partitions.get(tp.partition) if topic is not None else None
        if topic is None or partition is None or self._node.node_id not in partition.replicas:
            return None
        return self._node.log_config_for(topic.configs), topic.topic_id

    def _apply_in_thread(
        self, jobs: list[tuple[str, TopicPartition, tuple[LogConfig, object] | None]]
    ) -> list[PartitionLog | OSError | None]:
        log_manager = self._node.log_manager
        assert log_manager is not None
        outcomes: list[PartitionLog | OSError | None] = []
        deleted = False
        for operation, tp, creation in jobs:
            try:
                if operation == _DELETE:
                    deleted = log_manager.delete_log(tp, checkpoint=False) or deleted
                    outcomes.append(None)
                elif creation is None:
                    outcomes.append(None)
                else:
                    config, topic_id = creation
                    outcomes.append(log_manager.get_or_create_log(tp, config, topic_id=topic_id))
            except OSError as error:  # reported to the log dir's failure channel
                log.warning("%s of the log of %s failed: %s", operation, tp, error)
                outcomes.append(error)
        if deleted:
            log_manager.checkpoint_all()
        return outcomes

    def _attach(self, tp: TopicPartition, outcome: PartitionLog | OSError | None) -> None:
        """On the loop: host a created log as the image says now, or undo it."""
        node = self._node
        replica_manager = node.replica_manager
        if tp in self._queued:
            return  # deleted or recreated meanwhile: the queued work decides
        topic = node.metadata_image.topics.get(tp.topic)
        partition = topic.partitions.get(tp.partition) if topic is not None else None
        hosted = topic is not None and partition is not None and node.node_id in partition.replicas
        if isinstance(outcome, OSError):
            if hosted:
                replica_manager.mark_offline(tp, f"its log cannot be created: {outcome}")
            return
        if outcome is None:
            return
        if not hosted or topic is None:
            self._enqueue(_DELETE, tp)
            return
        if outcome.topic_id is not None and outcome.topic_id != topic_id_text(topic.topic_id):
            self._enqueue(_DELETE, tp)  # a topic of the same name, created again meanwhile
            self._enqueue(_CREATE, tp)
            return
        config = node.log_config_for(topic.configs)
        replica_manager.become_leader_or_follower(tp, _state(topic, tp), config)
        node.on_partition_hosted(tp)


def _state(topic: TopicImage, tp: TopicPartition) -> PartitionState:
    partition = topic.partitions[tp.partition]
    return PartitionState(
        topic_id=topic.topic_id,
        leader=partition.leader,
        leader_epoch=partition.leader_epoch,
        partition_epoch=partition.partition_epoch,
        replicas=partition.replicas,
        isr=partition.isr,
    )
