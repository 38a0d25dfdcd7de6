"""KIP-392 on the client: which replica a partition is read from."""

from __future__ import annotations

from moldau.client.read_replicas import ReadReplicas
from moldau.spark.options import client_settings
from moldau.types import TopicPartition

TP = TopicPartition("t", 0)


def test_a_named_replica_is_read_until_it_ages_or_fails() -> None:
    now = [0.0]
    replicas = ReadReplicas(300.0, clock=lambda: now[0])
    assert replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 1
    replicas.answered(TP, node=1, preferred_read_replica=-1)  # no rack-aware selector
    assert replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 1
    replicas.answered(TP, node=1, preferred_read_replica=2)
    assert replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 2 and replicas.preferred(TP) == 2
    replicas.answered(TP, node=2, preferred_read_replica=-1)  # the replica itself serves
    assert replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 2
    now[0] = 300.0  # metadata.max.age.ms later: ask the leader again
    assert (
        replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 1 and replicas.preferred(TP) is None
    )
    replicas.answered(TP, node=1, preferred_read_replica=3)
    replicas.failed([TP])
    assert replicas.node_for(TP, leader=1, brokers={1, 2, 3}) == 1
    replicas.answered(TP, node=1, preferred_read_replica=3)
    assert replicas.node_for(TP, leader=1, brokers={1, 2}) == 1  # 3 left the metadata
    assert replicas.preferred(TP) is None


def test_spark_passes_client_rack_to_the_client() -> None:
    settings = client_settings({"kafka.bootstrap.servers": "b:9092", "kafka.client.rack": "r2"})
    assert settings["client.rack"] == "r2"
