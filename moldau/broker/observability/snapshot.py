"""What a scrape reads of a node, copied into plain values on the node's event loop (where the
partitions, counters, groups and quorum live), so that turning them into Prometheus families
and text can run in a worker thread without holding the loop (`collector.py`): with 2,000
partitions that part is most of a scrape's time.

Reading is proportional to the partitions and committed offsets the node has; everything here is
an attribute read or an addition.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.controller import QuorumController
from moldau.coordinator.store import CommittedOffset
from moldau.replication.replica_manager import ReplicaManager
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = [
    "BrokerSnapshot",
    "ClusterCounts",
    "NodeSnapshot",
    "QuorumSnapshot",
    "group_lag",
    "take_snapshot",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSnapshot:
    traffic: list[tuple[str, int, int, int]]  # topic, messages in, bytes in, bytes out
    partitions: int
    leaders: int
    under_replicated: int
    offline: int
    isr_shrinks: int
    isr_expands: int
    delayed_produces: int
    delayed_produce_partitions: int
    delayed_fetches: int
    fetch_watches: int
    logs: list[tuple[str, int, int, int, int]]  # topic, partition, size, log end, log start
    groups: list[tuple[CommittedOffset, int]]  # a committed offset and its lag


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterCounts:
    """A controller's view of the cluster, from its own metadata image."""

    fenced_brokers: int
    active_brokers: int
    topics: int
    partitions: int
    offline_partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumSnapshot:
    leader: int  # -1: none known
    epoch: int
    high_watermark: int
    log_end_offset: int
    applied_offset: int
    active_controller: bool
    cluster: ClusterCounts | None  # (nodes with the controller role)
    replica_lags: list[tuple[int, str, int]]  # replica, voter or observer, lag (the leader's)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSnapshot:
    requests: list[int]  # per API key
    request_buckets: list[list[int]]  # per API key: counts per bucket, not cumulative
    request_seconds: list[float]
    connections: list[tuple[str, int]]  # listener, open connections
    broker: BrokerSnapshot | None
    quorum: QuorumSnapshot | None


def take_snapshot(node: BrokerServices) -> NodeSnapshot:
    metrics = node.request_metrics
    replica_manager = node.replica_manager if node.layout.is_broker else None
    controller = node.controller
    broker = None
    if replica_manager is not None and controller is not None:
        coordinator = node.group_coordinator
        committed = coordinator.committed_offsets() if coordinator is not None else ()
        broker = _broker(replica_manager, set(controller.image.topics), committed)
    return NodeSnapshot(
        requests=list(metrics.requests),
        request_buckets=[list(buckets) for buckets in metrics.buckets],
        request_seconds=list(metrics.seconds),
        connections=[
            (listener.endpoint.name, len(listener.connections))
            for listener in [*node.listeners, *node.controller_listeners]
        ],
        broker=broker,
        quorum=_quorum(controller, is_controller=node.layout.is_controller)
        if controller is not None
        else None,
    )


def group_lag(
    committed: Iterable[CommittedOffset], replica_manager: ReplicaManager
) -> Iterator[tuple[CommittedOffset, int]]:
    """Each committed offset with its lag: the high watermark of the partition's replica here
    less the offset, at least 0; offsets of partitions with no replica here are left out."""
    partitions = replica_manager.partitions
    for offset in committed:
        partition = partitions.get(TopicPartition(offset.topic, offset.partition))
        if partition is not None:
            yield offset, max(partition.log.high_watermark - offset.offset, 0)


def _broker(
    replica_manager: ReplicaManager, topics: set[str], committed: Iterable[CommittedOffset]
) -> BrokerSnapshot:
    stats = replica_manager.stats
    stats.forget_topics_except(topics)
    partitions = replica_manager.partitions
    leaders = [partition for partition in partitions.values() if partition.is_leader]
    purgatory = replica_manager.fetch_purgatory
    return BrokerSnapshot(
        traffic=[
            (topic, traffic.messages_in, traffic.bytes_in, traffic.bytes_out)
            for topic, traffic in stats.topics.items()
        ],
        partitions=len(partitions),
        leaders=len(leaders),
        under_replicated=sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
        offline=len(replica_manager.offline_partitions),
        isr_shrinks=stats.isr_shrinks,
        isr_expands=stats.isr_expands,
        delayed_produces=stats.delayed_produces,
        delayed_produce_partitions=stats.delayed_produce_partitions,
        delayed_fetches=purgatory.delayed(),
        fetch_watches=len(purgatory),
        logs=[
            (
                tp.topic,
                tp.partition,
                partition.log.size_bytes,
                partition.log.log_end_offset,
                partition.log.log_start_offset,
            )
            for tp, partition in partitions.items()
        ],
        groups=list(group_lag(committed, replica_manager)),
    )


def _quorum(controller: QuorumController, *, is_controller: bool) -> QuorumSnapshot:
    quorum = controller.describe_quorum()
    log_end_offset = controller.driver.node.log_end_offset
    cluster = None
    if is_controller:
        image = controller.image
        partitions = [p for topic in image.topics.values() for p in topic.partitions.values()]
        fenced = sum(1 for broker in image.brokers.values() if broker.fenced)
        cluster = ClusterCounts(
            fenced_brokers=fenced,
            active_brokers=len(image.brokers) - fenced,
            topics=len(image.topics),
            partitions=len(partitions),
            offline_partitions=sum(1 for p in partitions if not p.has_leader),
        )
    lags = []
    if quorum.leader_id == quorum.node_id:
        for kind, replicas in (("voter", quorum.voters), ("observer", quorum.observers)):
            for replica in replicas:
                if replica.replica_id == quorum.node_id:
                    lags.append((replica.replica_id, kind, 0))
                elif replica.log_end_offset >= 0:  # (-1: not heard from yet)
                    behind = max(log_end_offset - replica.log_end_offset, 0)
                    lags.append((replica.replica_id, kind, behind))
    return QuorumSnapshot(
        leader=-1 if quorum.leader_id is None else quorum.leader_id,
        epoch=quorum.epoch,
        high_watermark=quorum.high_watermark,
        log_end_offset=log_end_offset,
        applied_offset=controller.metadata_offset,
        active_controller=controller.is_active,
        cluster=cluster,
        replica_lags=lags,
    )
