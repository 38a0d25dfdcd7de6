"""Partitions replicated over a cluster of real processes: followers pull from leaders with
Kafka's Fetch, replicas end byte for byte identical, acks=all waits for the ISR."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, Cluster, build_cluster, wait_for

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def _segment_bytes(cluster: Cluster, topic: str, partition: int) -> dict[int, bytes]:
    """Each node's `.log` files of one partition, concatenated in offset order."""
    contents = {}
    for node in cluster.nodes.values():
        directory = node.data_dir / f"{topic}-{partition}"
        files = sorted(directory.glob("*.log")) if directory.exists() else []
        contents[node.node_id] = b"".join(path.read_bytes() for path in files)
    return contents


def test_a_replicated_topic_ends_identical_on_every_replica(start_server, tmp_path: Path) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=FAST)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("replicated", 3, 3, config={"min.insync.replicas": "2"})])[
        "replicated"
    ].result(15)
    wait_for(
        lambda: "replicated" in admin.list_topics(timeout=5).topics,
        timeout_s=10,
        what="the topic in the metadata",
    )
    metadata = admin.list_topics(timeout=10).topics["replicated"]
    for partition in metadata.partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]
    assert {p.leader for p in metadata.partitions.values()} == {1, 2, 3}

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    sent = [b"value-%05d" % index for index in range(1500)]
    for index, value in enumerate(sent):
        producer.produce("replicated", key=b"%d" % index, value=value)
    assert producer.flush(60) == 0

    for partition in range(3):
        wait_for(
            lambda p=partition: len(set(_segment_bytes(cluster, "replicated", p).values())) == 1,
            timeout_s=20,
            what=f"replicas of partition {partition} identical",
        )
        assert _segment_bytes(cluster, "replicated", partition)[1]  # not trivially empty

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "verify",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["replicated"])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value())
    high = [consumer.get_watermark_offsets(TopicPartition("replicated", p))[1] for p in range(3)]
    consumer.close()
    assert sorted(received) == sent  # every acknowledged record exactly once
    assert sum(high) == len(sent)

    # A transaction over partitions led by three brokers: the coordinator sends each leader its
    # markers; read_committed sees the committed records and none of the aborted ones.
    transactional = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": "across-brokers"}
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for index in range(30):
        transactional.produce("replicated", key=b"%d" % index, value=b"committed-%d" % index)
    transactional.commit_transaction(30)
    transactional.begin_transaction()
    for index in range(30):
        transactional.produce("replicated", key=b"%d" % index, value=b"aborted-%d" % index)
    transactional.abort_transaction(30)
    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "committed-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    reader.subscribe(["replicated"])
    seen: list[bytes] = []
    expected = len(sent) + 30
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    # Past the committed records the read stops at the end of every partition: nothing more.
    extra = [m for m in (reader.poll(1.0) for _ in range(3)) if m is not None and not m.error()]
    reader.close()
    assert sorted(seen) == sorted(sent + [b"committed-%d" % i for i in range(30)])
    assert not extra and not any(v.startswith(b"aborted") for v in seen)
