"""The node's Prometheus families, computed when `/metrics` is scraped from what the node keeps
anyway: the counters of its data path (`replication.stats`) and dispatcher (`RequestMetrics`),
its partitions, listeners, coordinators and metadata quorum (`quorum_families`).

Names are those the JMX exporter gives Kafka's MBeans (and kafka-exporter gives group lag), so
dashboards built for Kafka read them; docs/METRICS.md lists each series, its labels and which
node exports it. A scrape runs on the node's event loop (what it reads is the loop's), in
time proportional to the partitions and groups the node has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from moldau.broker.observability.quorum_metrics import quorum_families
from moldau.broker.observability.request_metrics import BUCKET_BOUNDS_MS, RequestMetrics, api_name
from moldau.coordinator.store import CommittedOffset
from moldau.replication.replica_manager import ReplicaManager
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["NodeCollector", "group_lag"]

_LE = [str(bound) for bound in BUCKET_BOUNDS_MS] + ["+Inf"]


class NodeCollector(Collector):
    def __init__(self, node: BrokerServices) -> None:
        self._node = node

    def collect(self) -> Iterable[Metric]:
        node = self._node
        yield from request_families(node.request_metrics)
        yield connection_family(node)
        replica_manager = node.replica_manager if node.layout.is_broker else None
        controller = node.controller
        if replica_manager is not None and controller is not None:
            yield from broker_families(replica_manager, set(controller.image.topics))
            coordinator = node.group_coordinator
            if coordinator is not None:
                yield from group_families(coordinator.committed_offsets(), replica_manager)
        if controller is not None:
            yield from quorum_families(node, controller)


def request_families(metrics: RequestMetrics) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests taken by a handler, per Kafka API",
        labels=["request"],
    )
    total_time = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltimems",
        "Milliseconds from a handler taking a request to its answer being ready, per Kafka API",
        labels=["request"],
    )
    for api_key, count in enumerate(metrics.requests):
        if not count:
            continue
        name = api_name(api_key)
        requests.add_metric([name], count)
        cumulative = list(accumulate(metrics.buckets[api_key]))
        total_time.add_metric(
            [name],
            buckets=list(zip(_LE, cumulative, strict=True)),
            sum_value=metrics.seconds[api_key] * 1000,
        )
    yield requests
    yield total_time


def connection_family(node: BrokerServices) -> Metric:
    connections = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count",
        "Open connections, per listener",
        labels=["listener"],
    )
    for listener in [*node.listeners, *node.controller_listeners]:
        connections.add_metric([listener.endpoint.name], len(listener.connections))
    return connections


def broker_families(replica_manager: ReplicaManager, topics: set[str]) -> Iterator[Metric]:
    stats = replica_manager.stats
    stats.forget_topics_except(topics)
    messages_in = CounterMetricFamily(
        "kafka_server_brokertopicmetrics_messagesin",
        "Records appended as leader, per topic",
        labels=["topic"],
    )
    bytes_in = CounterMetricFamily(
        "kafka_server_brokertopicmetrics_bytesin",
        "Bytes of record batches appended as leader, per topic",
        labels=["topic"],
    )
    bytes_out = CounterMetricFamily(
        "kafka_server_brokertopicmetrics_bytesout",
        "Bytes of records answered to consumers' fetches, per topic",
        labels=["topic"],
    )
    for topic, traffic in sorted(stats.topics.items()):
        messages_in.add_metric([topic], traffic.messages_in)
        bytes_in.add_metric([topic], traffic.bytes_in)
        bytes_out.add_metric([topic], traffic.bytes_out)
    yield from (messages_in, bytes_in, bytes_out)

    partitions = replica_manager.partitions
    leaders = [p for p in partitions.values() if p.is_leader]
    yield GaugeMetricFamily(
        "kafka_server_replicamanager_partitioncount",
        "Partition replicas hosted here",
        len(partitions),
    )
    yield GaugeMetricFamily(
        "kafka_server_replicamanager_leadercount", "Partitions led here", len(leaders)
    )
    yield GaugeMetricFamily(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions led here whose ISR is smaller than their replicas",
        sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
    )
    yield GaugeMetricFamily(
        "kafka_server_replicamanager_offlinereplicacount",
        "Replicas that should be hosted here but have no usable log",
        len(replica_manager.offline_partitions),
    )
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrshrinks",
        "Changes of a led partition's ISR that removed a member",
        value=stats.isr_shrinks,
    )
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrexpands",
        "Changes of a led partition's ISR that added a member",
        value=stats.isr_expands,
    )

    purgatory_size = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Parked operations counted once per partition each waits on",
        labels=["delayedOperation"],
    )
    purgatory_size.add_metric(["Produce"], stats.delayed_produce_partitions)
    purgatory_size.add_metric(["Fetch"], len(replica_manager.fetch_purgatory))
    yield purgatory_size
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Parked operations: acks=all produces waiting for replication, fetches for min.bytes",
        labels=["delayedOperation"],
    )
    delayed.add_metric(["Produce"], stats.delayed_produces)
    delayed.add_metric(["Fetch"], replica_manager.fetch_purgatory.delayed())
    yield delayed

    size = GaugeMetricFamily(
        "kafka_log_log_size",
        "Bytes of a hosted replica's segment files",
        labels=["topic", "partition"],
    )
    log_end = GaugeMetricFamily(
        "kafka_log_log_logendoffset",
        "The offset after a hosted replica's last record",
        labels=["topic", "partition"],
    )
    log_start = GaugeMetricFamily(
        "kafka_log_log_logstartoffset",
        "A hosted replica's first offset",
        labels=["topic", "partition"],
    )
    for tp, partition in sorted(partitions.items()):
        labels = [tp.topic, str(tp.partition)]
        log = partition.log
        size.add_metric(labels, log.size_bytes)
        log_end.add_metric(labels, log.log_end_offset)
        log_start.add_metric(labels, log.log_start_offset)
    yield from (size, log_end, log_start)


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


def group_families(
    committed: Iterable[CommittedOffset], replica_manager: ReplicaManager
) -> Iterator[Metric]:
    labels = ["consumergroup", "topic", "partition"]
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "A group's committed offset behind the partition's high watermark, in records",
        labels=labels,
    )
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "A group's committed offset", labels=labels
    )
    for offset, behind in sorted(group_lag(committed, replica_manager)):
        values = [offset.group_id, offset.topic, str(offset.partition)]
        lag.add_metric(values, behind)
        current.add_metric(values, offset.offset)
    yield lag
    yield current
