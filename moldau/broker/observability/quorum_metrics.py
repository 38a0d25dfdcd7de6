"""The metadata quorum and the controller as a node sees them (Kafka's `raft-metrics`,
`broker-metadata-metrics` and `KafkaController` MBeans, and Moldau's own replica lag), from a
`QuorumSnapshot`.

Every node (each follows the quorum, as a voter or an observer) exports the quorum's leader,
epoch and high watermark as it knows them, its own log end, the metadata offset it has applied
and whether it is the active controller. Nodes with the controller role export the cluster's
counts from their own image, as Kafka's controllers do (aggregate them with max, not sum). Only
the quorum's leader knows how far each voter and observer is behind it.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from moldau.broker.observability.snapshot import QuorumSnapshot

__all__ = ["quorum_families"]


def quorum_families(quorum: QuorumSnapshot) -> Iterator[Metric]:
    for name, documentation, value in (
        (
            "kafka_server_raft_metrics_current_leader",
            "The metadata quorum's leader as this node knows it (-1: none known)",
            quorum.leader,
        ),
        (
            "kafka_server_raft_metrics_current_epoch",
            "The metadata quorum's epoch as this node knows it",
            quorum.epoch,
        ),
        (
            "kafka_server_raft_metrics_high_watermark",
            "The metadata log's high watermark as this node knows it",
            quorum.high_watermark,
        ),
        (
            "kafka_server_raft_metrics_log_end_offset",
            "The end of this node's copy of the metadata log",
            quorum.log_end_offset,
        ),
        (
            "kafka_server_broker_metadata_metrics_last_applied_record_offset",
            "The offset of the last metadata record applied to this node's image",
            quorum.applied_offset,
        ),
        (
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 elsewhere",
            int(quorum.active_controller),
        ),
    ):
        yield GaugeMetricFamily(name, documentation, value)
    cluster = quorum.cluster
    if cluster is not None:
        for name, documentation, value in (
            ("fencedbrokercount", "Registered brokers fenced", cluster.fenced_brokers),
            ("activebrokercount", "Registered brokers not fenced", cluster.active_brokers),
            ("globaltopiccount", "Topics in the cluster", cluster.topics),
            ("globalpartitioncount", "Partitions in the cluster", cluster.partitions),
            ("offlinepartitionscount", "Partitions without a leader", cluster.offline_partitions),
        ):
            yield GaugeMetricFamily(
                f"kafka_controller_kafkacontroller_{name}", documentation, value
            )
    if quorum.replica_lags:
        lag = GaugeMetricFamily(
            "moldau_quorum_replica_lag",
            "Records a voter's or observer's copy of the metadata log is behind the leader's "
            "(exported by the quorum's leader)",
            labels=["replica", "kind"],
        )
        for replica, kind, behind in quorum.replica_lags:
            lag.add_metric([str(replica), kind], behind)
        yield lag
