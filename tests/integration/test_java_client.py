"""Apache Kafka's Java client against Moldau, through the verifiable clients of Kafka's own
system tests (`VerifiableProducer`, `VerifiableConsumer`, `TransactionalMessageCopier`), which
print every acknowledged send and every record consumed as JSON lines.

- the idempotent producer (the Java client's default) with acks=all, and consumer groups over the
  classic protocol and KIP-848's `group.protocol=consumer`, with the 4.1 client and the newest;
- exactly-once consume-transform-produce (a transactional id per input partition, offsets
  committed in the transaction, random aborts) at transaction version 2;
- on three nodes, the partition leader SIGKILLed while the producer runs: every acknowledged
  record is read back once, in the order of its offsets.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, build_cluster, wait_for
from .kafka_jvm import KAFKA_4_1, KAFKA_NEWEST, TOOLS, KafkaJvm
from .support import unique_topic, wait_until


def _events(output: str) -> Iterator[dict[str, Any]]:
    for line in output.splitlines():
        if line.startswith("{"):
            yield json.loads(line)


def _create_topic(bootstrap: str, topic: str, partitions: int, replicas: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replicas > 1 else {}
    admin.create_topics([NewTopic(topic, partitions, replicas, config=config)])[topic].result(30)


def _idempotent_producer_config(directory: Path) -> Path:
    """VerifiableProducer sets retries=0 (which quietly turns idempotence off) unless its
    config file says otherwise: the Java producer's defaults, restored."""
    path = directory / "idempotent-producer.properties"
    path.write_text(
        "enable.idempotence=true\nretries=2147483647\n"
        "delivery.timeout.ms=120000\nrequest.timeout.ms=10000\n"
    )
    return path


def _produce(
    kafka_jvm: KafkaJvm, bootstrap: str, topic: str, count: int, directory: Path
) -> dict[tuple[int, int], str]:
    """VerifiableProducer, idempotent with acks=all, keys spread over the partitions:
    (partition, offset) -> value acknowledged."""
    completed = kafka_jvm.tool(
        "kafka-verifiable-producer",
        "--topic",
        topic,
        "--max-messages",
        str(count),
        "--repeating-keys",
        "100",
        "--acks",
        "-1",
        "--producer.config",
        str(_idempotent_producer_config(directory)),
        "--bootstrap-server",
        bootstrap,
    )
    acked = {
        (event["partition"], event["offset"]): event["value"]
        for event in _events(completed.stdout)
        if event["name"] == "producer_send_success"
    }
    assert len(acked) == count, completed.stdout[-2000:]
    return acked


def _consume(
    kafka_jvm: KafkaJvm, bootstrap: str, topic: str, count: int, group_protocol: str
) -> tuple[dict[tuple[int, int], str], dict[int, int]]:
    """VerifiableConsumer in a new group until `count` records: (partition, offset) -> value
    consumed, and the offsets it committed per partition."""
    arguments = [
        "--topic",
        topic,
        "--group-id",
        f"{topic}-{group_protocol}",
        "--group-protocol",
        group_protocol,
        "--bootstrap-server",
        bootstrap,
        "--verbose",
        "--reset-policy",
        "earliest",
        "--max-messages",
        str(count),
    ]
    if group_protocol == "classic":
        arguments += ["--session-timeout", "10000"]
    completed = kafka_jvm.tool("kafka-verifiable-consumer", *arguments, timeout=120)
    consumed: dict[tuple[int, int], str] = {}
    committed: dict[int, int] = {}
    for event in _events(completed.stdout):
        if event["name"] == "record_data":
            key = (event["partition"], event["offset"])
            assert key not in consumed, f"{key} consumed twice"
            consumed[key] = event["value"]
        elif event["name"] == "offsets_committed":
            assert event["success"], event
            for offset in event["offsets"]:
                committed[offset["partition"]] = offset["offset"]
    return consumed, committed


@pytest.mark.parametrize(
    ("version", "group_protocol"),
    [(KAFKA_4_1, "classic"), (KAFKA_4_1, "consumer"), (KAFKA_NEWEST, "consumer")],
)
def test_java_producer_and_consumer_groups(
    server, tmp_path: Path, version: str, group_protocol: str
) -> None:
    kafka_jvm = KafkaJvm.of(version)
    topic = unique_topic(f"java-{group_protocol}")
    bootstrap = server.bootstrap_servers
    _create_topic(bootstrap, topic, 3)
    acked = _produce(kafka_jvm, bootstrap, topic, 3000, tmp_path)
    assert {partition for partition, _ in acked} == {0, 1, 2}
    consumed, committed = _consume(kafka_jvm, bootstrap, topic, 3000, group_protocol)
    assert consumed == acked
    ends = {partition: 0 for partition in range(3)}
    for partition, offset in acked:
        ends[partition] = max(ends[partition], offset + 1)
    assert committed == ends


def test_java_exactly_once_copy_with_aborts(server, tmp_path: Path, kafka_jvm: KafkaJvm) -> None:
    """TransactionalMessageCopier (Kafka's exactly-once system test client): consume a
    partition, produce to the output in transactions of 50 with the consumer's offsets, abort
    some at random. The output holds each input record exactly once, in input order."""
    source, sink = unique_topic("java-eos-in"), unique_topic("java-eos-out")
    bootstrap = server.bootstrap_servers
    _create_topic(bootstrap, source, 1)
    _create_topic(bootstrap, sink, 1)
    acked = _produce(kafka_jvm, bootstrap, source, 1000, tmp_path)
    completed = kafka_jvm.run(
        "org.apache.kafka.tools.TransactionalMessageCopier",
        [
            "--broker-list",
            bootstrap,
            "--input-topic",
            source,
            "--input-partition",
            "0",
            "--output-topic",
            sink,
            "--transactional-id",
            f"{source}-copier",
            "--consumer-group",
            f"{source}-copier",
            "--transaction-size",
            "50",
            "--max-messages",
            "1000",
            "--enable-random-aborts",
            "--use-group-metadata",
        ],
        timeout=180,
    )
    progress = list(_events(completed.stdout))
    assert progress and progress[-1]["remaining"] == 0, completed.stdout[-2000:]
    assert _read_committed(bootstrap, sink, 1000) == [acked[(0, offset)] for offset in range(1000)]


def _read_committed(bootstrap: str, topic: str, count: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def read() -> bool:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                values.append(message.value().decode())
            return len(values) >= count

        wait_until(read, timeout=60, message=f"{count} committed records")
        values += [m.value().decode() for m in consumer.consume(500, timeout=1)]
    finally:
        consumer.close()
    return values


@dataclass
class _BackgroundProducer:
    """A VerifiableProducer in the background; its acknowledgements collected as they come."""

    process: Any
    acked: dict[tuple[int, int], str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def follow(self) -> None:
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["name"] == "producer_send_success":
                self.acked[(event["partition"], event["offset"])] = event["value"]
            elif event["name"] == "producer_send_error":
                self.failed.append(f"{event['value']}: {event['exception']}: {event['message']}")


def test_java_producer_survives_the_leader_being_killed(
    start_server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3)
    topic = unique_topic("java-failover")
    _create_topic(cluster.bootstrap, topic, 1, replicas=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def leader() -> int | None:
        partition = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
        return partition.leader if sorted(partition.isrs) == [1, 2, 3] else None

    first_leader = int(wait_for(leader, timeout_s=30, what="an ISR of three"))  # type: ignore[arg-type]
    producer = _BackgroundProducer(
        kafka_jvm.start(
            TOOLS["kafka-verifiable-producer"],
            [
                "--topic",
                topic,
                "--max-messages",
                "3000",
                "--throughput",
                "600",
                "--acks",
                "-1",
                "--producer.config",
                str(_idempotent_producer_config(tmp_path)),
                "--bootstrap-server",
                cluster.bootstrap,
            ],
            log_path=tmp_path / "producer.log",
        )
    )
    producer.reader = threading.Thread(target=producer.follow, daemon=True)
    producer.reader.start()
    try:
        wait_until(lambda: len(producer.acked) >= 800, timeout=60, message="800 acknowledged")
        cluster.kill(first_leader)
        assert producer.process.wait(timeout=180) == 0
        producer.reader.join(10)
    finally:
        if producer.process.poll() is None:
            producer.process.kill()
            producer.process.wait()
    assert producer.failed == []
    assert len(producer.acked) == 3000
    survivors = cluster.bootstrap_without(first_leader)
    values = _read_committed(survivors, topic, 3000)
    assert values == [producer.acked[(0, offset)] for offset in range(3000)]
    assert values == [str(n) for n in range(3000)]  # once each, in the order sent


def test_java_exactly_once_copy_while_the_output_leader_is_killed(
    start_server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    """The exactly-once copy on three nodes (replication factor 3, transaction version 2): the
    leader of the output partition is SIGKILLed mid-copy; the copier's transactions carry on
    through the new leader and the output still holds each input record exactly once."""
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3)
    source, sink = unique_topic("java-eos-in"), unique_topic("java-eos-out")
    _create_topic(cluster.bootstrap, source, 1, replicas=3)
    _create_topic(cluster.bootstrap, sink, 1, replicas=3)
    acked = _produce(kafka_jvm, cluster.bootstrap, source, 2000, tmp_path)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    victim = admin.list_topics(sink, timeout=10).topics[sink].partitions[0].leader
    copier = kafka_jvm.start(
        "org.apache.kafka.tools.TransactionalMessageCopier",
        [
            "--broker-list",
            cluster.bootstrap,
            "--input-topic",
            source,
            "--input-partition",
            "0",
            "--output-topic",
            sink,
            "--transactional-id",
            f"{source}-copier",
            "--consumer-group",
            f"{source}-copier",
            "--transaction-size",
            "50",
            "--max-messages",
            "2000",
            "--use-group-metadata",
        ],
        log_path=tmp_path / "copier.log",
    )
    progress: list[dict[str, Any]] = []

    def follow() -> None:
        assert copier.stdout is not None
        progress.extend(_events_of(copier.stdout))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        wait_until(
            lambda: any(event.get("consumed", 0) >= 500 for event in progress),
            timeout=90,
            message="500 records copied",
        )
        cluster.kill(victim)
        assert copier.wait(timeout=180) == 0, (tmp_path / "copier.log").read_text()[-3000:]
        reader.join(10)
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait()
    assert progress[-1]["remaining"] == 0, progress[-3:]
    survivors = cluster.bootstrap_without(victim)
    assert _read_committed(survivors, sink, 2000) == [acked[(0, o)] for o in range(2000)]


def _events_of(lines: Any) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("{"):
            yield json.loads(line)
