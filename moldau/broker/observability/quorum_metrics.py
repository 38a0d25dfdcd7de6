"""The metadata quorum and the controller as a node sees them (Kafka's `raft-metrics`,
`broker-metadata-metrics` and `KafkaController` MBeans, and Moldau's own replica lag).

Every node (each follows the quorum, as a voter or an observer) exports the quorum's leader,
epoch and high watermark as it knows them, its own log end, the metadata offset it has applied
and whether it is the active controller. Nodes with the controller role export the cluster's
counts from their own image, as Kafka's controllers do (aggregate them with max, not sum). Only
the quorum's leader knows how far each voter and observer is behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

from moldau.controller import QuorumController

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["quorum_families"]


def quorum_families(node: BrokerServices, controller: QuorumController) -> Iterator[Metric]:
    quorum = controller.describe_quorum()
    log_end_offset = controller.driver.node.log_end_offset
    yield GaugeMetricFamily(
        "kafka_server_raft_metrics_current_leader",
        "The metadata quorum's leader as this node knows it (-1: none known)",
        -1 if quorum.leader_id is None else quorum.leader_id,
    )
    yield GaugeMetricFamily(
        "kafka_server_raft_metrics_current_epoch",
        "The metadata quorum's epoch as this node knows it",
        quorum.epoch,
    )
    yield GaugeMetricFamily(
        "kafka_server_raft_metrics_high_watermark",
        "The metadata log's high watermark as this node knows it",
        quorum.high_watermark,
    )
    yield GaugeMetricFamily(
        "kafka_server_raft_metrics_log_end_offset",
        "The end of this node's copy of the metadata log",
        log_end_offset,
    )
    yield GaugeMetricFamily(
        "kafka_server_broker_metadata_metrics_last_applied_record_offset",
        "The offset of the last metadata record applied to this node's image",
        controller.metadata_offset,
    )
    yield GaugeMetricFamily(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "1 on the active controller, 0 elsewhere",
        1 if controller.is_active else 0,
    )
    if node.layout.is_controller:
        image = controller.image
        partitions = [p for topic in image.topics.values() for p in topic.partitions.values()]
        fenced = sum(1 for broker in image.brokers.values() if broker.fenced)
        for name, documentation, value in (
            ("fencedbrokercount", "Registered brokers fenced", fenced),
            ("activebrokercount", "Registered brokers not fenced", len(image.brokers) - fenced),
            ("globaltopiccount", "Topics in the cluster", len(image.topics)),
            ("globalpartitioncount", "Partitions in the cluster", len(partitions)),
            (
                "offlinepartitionscount",
                "Partitions without a leader",
                sum(1 for p in partitions if not p.has_leader),
            ),
        ):
            yield GaugeMetricFamily(
                f"kafka_controller_kafkacontroller_{name}", documentation, value
            )
    if quorum.leader_id == quorum.node_id:
        lag = GaugeMetricFamily(
            "moldau_quorum_replica_lag",
            "Records a voter's or observer's copy of the metadata log is behind the leader's "
            "(exported by the quorum's leader)",
            labels=["replica", "kind"],
        )
        for kind, replicas in (("voter", quorum.voters), ("observer", quorum.observers)):
            for replica in replicas:
                if replica.replica_id == quorum.node_id:
                    lag.add_metric([str(replica.replica_id), kind], 0)
                elif replica.log_end_offset >= 0:  # (-1: not heard from yet)
                    behind = max(log_end_offset - replica.log_end_offset, 0)
                    lag.add_metric([str(replica.replica_id), kind], behind)
        yield lag
