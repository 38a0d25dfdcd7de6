"""Kafka's `kafka-transactions` tool on a three-node cluster, as an operator checks the
transactions of an exactly-once pipeline (Kafka Connect's, say) for one left hanging.

`find-hanging --broker-id N` asks broker N for the producers of every partition it hosts,
leader or follower (DescribeProducers names the broker, KIP-664), and `describe-producers
--broker-id N` one partition's: a follower answers from its own copy of the producer state, as
Kafka's replicas do, and sees the same open transaction as the leader.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, build_cluster, wait_for
from .kafka_jvm import KafkaJvm
from .support import DEADLINE_S, unique_topic


def test_every_replica_describes_its_producers_and_open_transactions(
    start_server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={"transaction.state.log.num.partitions": "3"},
    )
    bootstrap = cluster.bootstrap
    topic = unique_topic("txn-tools")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(DEADLINE_S)

    def in_sync() -> bool:
        partition = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
        return sorted(partition.isrs) == [1, 2, 3]

    wait_for(in_sync, timeout_s=DEADLINE_S, what="an ISR of three")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    assert producer.flush(DEADLINE_S) == 0

    for broker in (1, 2, 3):  # every replica of the topic and of the transaction log
        found = kafka_jvm.tool(
            "kafka-transactions",
            "--bootstrap-server",
            bootstrap,
            "find-hanging",
            "--broker-id",
            str(broker),
        )
        header, *hanging = [line for line in found.stdout.splitlines() if line.strip()]
        assert header.split() == [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
        assert hanging == []  # (open for less than the longest transaction timeout)

    def open_on_every_replica() -> bool:
        for broker in (1, 2, 3):
            described = kafka_jvm.tool(
                "kafka-transactions",
                "--bootstrap-server",
                bootstrap,
                "describe-producers",
                "--topic",
                topic,
                "--partition",
                "0",
                "--broker-id",
                str(broker),
            )
            rows = [line.split() for line in described.stdout.splitlines()[1:] if line.strip()]
            # ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, LastTimestamp,
            # CurrentTransactionStartOffset: the open transaction starts at offset 0
            if [row[-1] for row in rows] != ["0"]:
                return False
        return True

    # (a follower has the batch once it has fetched it)
    wait_for(open_on_every_replica, timeout_s=DEADLINE_S, what="the open transaction on 3 replicas")
    producer.abort_transaction(DEADLINE_S)
