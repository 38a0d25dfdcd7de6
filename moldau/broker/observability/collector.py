"""The node's Prometheus families, built at scrape time from a `NodeSnapshot` (what the node
keeps anyway: the counters of its data path and dispatcher, its partitions, listeners, groups
and metadata quorum, copied on the loop); this part runs in a worker thread.

Names are those the JMX exporter gives Kafka's MBeans (and kafka-exporter gives group lag), so
dashboards built for Kafka read them; docs/METRICS.md lists each series, its labels and which
node exports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import accumulate

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from moldau.broker.observability.quorum_metrics import quorum_families
from moldau.broker.observability.request_metrics import BUCKET_BOUNDS_MS, api_name
from moldau.broker.observability.snapshot import BrokerSnapshot, NodeSnapshot

__all__ = ["SnapshotCollector"]

_LE = [repr(float(bound)) for bound in BUCKET_BOUNDS_MS] + ["+Inf"]  # "5.0", as clients write le


class SnapshotCollector(Collector):
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        snapshot = self._snapshot
        yield from request_families(snapshot)
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections, per listener",
            labels=["listener"],
        )
        for listener, count in snapshot.connections:
            connections.add_metric([listener], count)
        yield connections
        if snapshot.broker is not None:
            yield from broker_families(snapshot.broker)
            yield from group_families(snapshot.broker)
        if snapshot.quorum is not None:
            yield from quorum_families(snapshot.quorum)


def request_families(snapshot: NodeSnapshot) -> Iterator[Metric]:
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
    for api_key, count in enumerate(snapshot.requests):
        if not count:
            continue
        name = api_name(api_key)
        requests.add_metric([name], count)
        cumulative = accumulate(snapshot.request_buckets[api_key])
        total_time.add_metric(
            [name],
            buckets=list(zip(_LE, cumulative, strict=True)),
            sum_value=snapshot.request_seconds[api_key] * 1000,
        )
    yield requests
    yield total_time


def broker_families(broker: BrokerSnapshot) -> Iterator[Metric]:
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
    for topic, messages, received, sent in sorted(broker.traffic):
        messages_in.add_metric([topic], messages)
        bytes_in.add_metric([topic], received)
        bytes_out.add_metric([topic], sent)
    yield from (messages_in, bytes_in, bytes_out)

    for name, documentation, value in (
        ("partitioncount", "Partition replicas hosted here", broker.partitions),
        ("leadercount", "Partitions led here", broker.leaders),
        (
            "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replicas",
            broker.under_replicated,
        ),
        (
            "offlinereplicacount",
            "Replicas that should be hosted here but have no usable log",
            broker.offline,
        ),
    ):
        yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", documentation, value)
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrshrinks",
        "Changes of a led partition's ISR that removed a member",
        value=broker.isr_shrinks,
    )
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrexpands",
        "Changes of a led partition's ISR that added a member",
        value=broker.isr_expands,
    )

    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Parked requests: acks=all produces waiting for replication, fetches for min.bytes",
        labels=["delayedOperation"],
    )
    delayed.add_metric(["Produce"], broker.delayed_produces)
    delayed.add_metric(["Fetch"], broker.delayed_fetches)
    yield delayed
    watches = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Parked requests, each counted once per partition it waits on",
        labels=["delayedOperation"],
    )
    watches.add_metric(["Produce"], broker.delayed_produce_partitions)
    watches.add_metric(["Fetch"], broker.fetch_watches)
    yield watches

    labels = ["topic", "partition"]
    size = GaugeMetricFamily(
        "kafka_log_log_size", "Bytes of a hosted replica's segment files", labels=labels
    )
    log_end = GaugeMetricFamily(
        "kafka_log_log_logendoffset",
        "The offset after a hosted replica's last record",
        labels=labels,
    )
    log_start = GaugeMetricFamily(
        "kafka_log_log_logstartoffset", "A hosted replica's first offset", labels=labels
    )
    for topic, partition, size_bytes, log_end_offset, log_start_offset in sorted(broker.logs):
        values = [topic, str(partition)]
        size.add_metric(values, size_bytes)
        log_end.add_metric(values, log_end_offset)
        log_start.add_metric(values, log_start_offset)
    yield from (size, log_end, log_start)


def group_families(broker: BrokerSnapshot) -> Iterator[Metric]:
    labels = ["consumergroup", "topic", "partition"]
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "A group's committed offset behind the partition's high watermark, in records",
        labels=labels,
    )
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "A group's committed offset", labels=labels
    )
    for offset, behind in sorted(broker.groups):
        values = [offset.group_id, offset.topic, str(offset.partition)]
        lag.add_metric(values, behind)
        current.add_metric(values, offset.offset)
    yield lag
    yield current
