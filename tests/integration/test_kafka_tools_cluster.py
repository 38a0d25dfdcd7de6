"""Apache Kafka 4.1's own command-line tools against one Moldau cluster of three combined nodes
(two log dirs each) for the whole module: kafka-reassign-partitions generate / execute with both
throttles / verify (which clears them), kafka-log-dirs, kafka-leader-election, kafka-transactions
describe-producers and find-hanging asking a follower, kafka-metadata-quorum and kafka-features
through brokers and controllers; and Fetch v18 (KIP-1166), which Kafka 4.1 serves on broker
listeners, asked by hand as a follower would.

The tools run in one JVM (`ToolShell`); each test checks their output and the cluster's state
through another client."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from .cluster import COMBINED, Cluster, build_cluster
from .conftest import ServerFactory
from .kafka_jvm import KafkaJvm, ToolShell
from .support import unique_topic, wait_until
from .test_cluster_replication import FAST
from .wire import Connection

pytestmark = pytest.mark.timeout(240)

THROTTLED_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
DYNAMIC_SOURCES = {
    source.value
    for source in (
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
}
BROKER_THROTTLES = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)


@pytest.fixture(scope="module")
def cluster(
    module_server_factory: ServerFactory, tmp_path_factory: pytest.TempPathFactory
) -> Cluster:
    """Three combined nodes with log dirs `node-N` and `node-N-b`; the module's server factory
    stops them (by PID) when the module ends."""
    base = tmp_path_factory.mktemp("tools-cluster")
    return build_cluster(
        module_server_factory,
        base,
        roles=[COMBINED] * 3,
        extra=FAST,
        per_node={
            n: {"log.dirs": f"{base / f'node-{n}'},{base / f'node-{n}-b'}"} for n in (1, 2, 3)
        },
    )


@pytest.fixture(scope="module")
def shell(kafka_jvm: KafkaJvm) -> Iterator[ToolShell]:
    with kafka_jvm.shell() as tool_shell:
        yield tool_shell


@pytest.fixture
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def tool(shell: ToolShell, cluster: Cluster, name: str, *arguments: str) -> str:
    return shell.tool(name, "--bootstrap-server", cluster.bootstrap, *arguments).stdout


def replicas(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, replicas), as the brokers' metadata has them."""
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return {p.id: (p.leader, list(p.replicas)) for p in found.partitions.values()}


def dynamic_configs(admin: AdminClient, resource: ConfigResource) -> dict[str, str]:
    configs = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in configs.items() if entry.source in DYNAMIC_SOURCES}


def create_topic(shell: ToolShell, cluster: Cluster, topic: str, *arguments: str) -> None:
    tool(shell, cluster, "kafka-topics", "--create", "--topic", topic, *arguments)


def produce(cluster: Cluster, topic: str, count: int, size: int = 100) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    values = [b"%06d:" % i + b"v" * size for i in range(count)]
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    return values


def read_partition(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic}-reader"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []

    def read() -> bool:
        for message in consumer.consume(500, timeout=0.5):
            if message.error() is None:
                values.append(message.value())
        return len(values) >= count

    try:
        wait_until(read, message=f"{count} records read from {topic}")
    finally:
        consumer.close()
    return values


def execute(
    shell: ToolShell,
    cluster: Cluster,
    plan: Path,
    target: dict[str, list[Any]],
    topic: str,
    *options: str,
) -> str:
    """kafka-reassign-partitions --execute of a plan (written to `plan`) that moves partition 0
    of `topic` to `target` (its replicas, and its log dirs if given)."""
    partition = {"topic": topic, "partition": 0, **target}
    plan.write_text(json.dumps({"version": 1, "partitions": [partition]}))
    return tool(
        shell,
        cluster,
        "kafka-reassign-partitions",
        "--execute",
        "--reassignment-json-file",
        str(plan),
        *options,
    )


def test_kafka_reassign_partitions_moves_replicas_and_log_dirs_under_throttles(
    cluster: Cluster, shell: ToolShell, admin: AdminClient, tmp_path: Path
) -> None:
    topic = unique_topic("tool-reassign")
    create_topic(shell, cluster, topic, "--replica-assignment", "1:2")
    values = produce(cluster, topic, 300)

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = tool(
        shell,
        cluster,
        "kafka-reassign-partitions",
        "--generate",
        "--topics-to-move-json-file",
        str(topics_file),
        "--broker-list",
        "2,3",
    ).splitlines()
    assert generated[0] == "Current partition replica assignment"
    assert json.loads(generated[1])["partitions"] == [
        {"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    ]
    assert generated[3] == "Proposed partition reassignment configuration"
    [proposed] = json.loads(generated[4])["partitions"]
    assert sorted(proposed["replicas"]) == [2, 3]

    # 1 leaves, 3 joins into its second log dir, and 2's replica moves to its second log dir.
    second_dir = {n: str(cluster.nodes[n].data_dir.with_name(f"node-{n}-b")) for n in (2, 3)}
    plan = tmp_path / "plan.json"
    executed = execute(
        shell,
        cluster,
        plan,
        {"replicas": [2, 3], "log_dirs": [second_dir[2], second_dir[3]]},
        topic,
        "--throttle",
        "10000000",
        "--replica-alter-log-dirs-throttle",
        "1000000",
    )
    assert "The inter-broker throttle limit was set to 10000000 B/s" in executed, executed
    assert "The replica-alter-dir throttle limit was set to 1000000 B/s" in executed, executed
    assert f"Successfully started partition reassignment for {topic}-0" in executed, executed
    for broker, directory in second_dir.items():
        assert (
            f"Successfully started moving log directory to {directory} for replica {topic}-0 "
            f"with broker {broker}"
        ) in executed, executed

    # Until verify clears them: the rates on every broker the move touches, the log-dir
    # throttle on those with log-dir moves, the moving replicas on the topic.
    for node in (1, 2, 3):
        broker = dynamic_configs(admin, ConfigResource(ResourceType.BROKER, str(node)))
        expected = {name: "10000000" for name in BROKER_THROTTLES[:2]}
        if node in second_dir:
            expected["replica.alter.log.dirs.io.max.bytes.per.second"] = "1000000"
        assert broker == expected, (node, broker)
    throttled = dynamic_configs(admin, ConfigResource(ResourceType.TOPIC, topic))
    assert set(throttled) == set(THROTTLED_REPLICAS), throttled

    def verify() -> subprocess.CompletedProcess[str]:
        return shell.tool(
            "kafka-reassign-partitions",
            "--bootstrap-server",
            cluster.bootstrap,
            "--verify",
            "--reassignment-json-file",
            str(plan),
            check=False,
        )

    def finished() -> subprocess.CompletedProcess[str] | None:
        answer = verify()
        return None if "is still in progress." in answer.stdout else answer

    # Until the moves complete, verify reports them and keeps the throttles; then it clears
    # them, the log-dir one included (which Moldau refused to remove, failing the tool)
    done = wait_until(finished, timeout=60, message="the reassignment completed")
    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert f"Reassignment of partition {topic}-0 is completed." in done.stdout, done.stdout
    for broker in second_dir:
        assert (
            f"Reassignment of replica {topic}-0-{broker} completed successfully." in done.stdout
        ), done.stdout
    assert re.search(r"^Clearing broker-level throttles on brokers [1-3,]+$", done.stdout, re.M)
    assert f"Clearing topic-level throttles on topic {topic}" in done.stdout, done.stdout

    assert replicas(admin, topic)[0][1] == [2, 3]
    log_dirs = json.loads(
        tool(shell, cluster, "kafka-log-dirs", "--describe", "--topic-list", topic).splitlines()[-1]
    )
    placed = {
        broker["broker"]: log_dir["logDir"]
        for broker in log_dirs["brokers"]
        for log_dir in broker["logDirs"]
        for partition in log_dir["partitions"]
        if partition["partition"] == f"{topic}-0" and not partition["isFuture"]
    }
    assert placed == second_dir
    assert dynamic_configs(admin, ConfigResource(ResourceType.TOPIC, topic)) == {}
    for node in (1, 2, 3):
        broker = dynamic_configs(admin, ConfigResource(ResourceType.BROKER, str(node)))
        assert not set(BROKER_THROTTLES) & set(broker), (node, broker)
    assert read_partition(cluster, topic, len(values)) == values


def test_kafka_leader_election_moves_leadership_to_the_preferred_replica(
    cluster: Cluster, shell: ToolShell, admin: AdminClient, tmp_path: Path
) -> None:
    topic = unique_topic("tool-election")
    create_topic(shell, cluster, topic, "--replica-assignment", "1:2:3")
    wait_until(lambda: replicas(admin, topic)[0] == (1, [1, 2, 3]), message="1 leads")
    # The same replicas in another order: 2 is now preferred, 1 still leads
    execute(shell, cluster, tmp_path / "reorder.json", {"replicas": [2, 1, 3]}, topic)
    wait_until(lambda: replicas(admin, topic)[0] == (1, [2, 1, 3]), message="replicas reordered")

    election = ("kafka-leader-election", "--topic", topic, "--partition", "0")
    elected = tool(shell, cluster, *election, "--election-type", "preferred")
    assert (
        elected == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    )
    wait_until(lambda: replicas(admin, topic)[0] == (2, [2, 1, 3]), message="2 leads")
    again = tool(shell, cluster, *election, "--election-type", "preferred")
    assert again == f"Valid replica already elected for partitions {topic}-0\n"
    unclean = tool(shell, cluster, *election, "--election-type", "unclean")
    assert unclean == f"Valid replica already elected for partitions {topic}-0\n"


def test_kafka_transactions_asks_a_follower_about_its_producers(
    cluster: Cluster, shell: ToolShell, admin: AdminClient
) -> None:
    """find-hanging --broker-id N describes the producers of every replica broker N hosts,
    followers included; DescribeProducers on a follower answered NOT_LEADER_OR_FOLLOWER."""
    topic = unique_topic("tool-hanging")
    create_topic(shell, cluster, topic, "--partitions", "1", "--replication-factor", "3")
    wait_until(lambda: len(replicas(admin, topic)[0][1]) == 3, message="three replicas")
    leader = replicas(admin, topic)[0][0]
    follower = next(n for n in (1, 2, 3) if n != leader)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic}-writer"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(30) == 0  # acks=all: on every in-sync replica

    producers = tool(
        shell,
        cluster,
        "kafka-transactions",
        "describe-producers",
        "--topic",
        topic,
        "--partition",
        "0",
        "--broker-id",
        str(follower),
    ).splitlines()
    assert producers[0].split() == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    [row] = [line.split() for line in producers[1:]]
    assert (row[3], row[5]) == ("0", "0")  # one record, its transaction open from offset 0

    hanging = ("kafka-transactions", "find-hanging", "--broker-id", str(follower))
    # Open for longer than 0 minutes, but its coordinator knows it: not hanging
    found = tool(shell, cluster, *hanging, "--max-transaction-timeout", "0").splitlines()
    assert found == [
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t"
    ]
    producer.commit_transaction(30)
    assert tool(shell, cluster, *hanging).splitlines() == found


def test_kafka_metadata_quorum_and_kafka_features_through_brokers_and_controllers(
    cluster: Cluster, shell: ToolShell
) -> None:
    controller = f"127.0.0.1:{cluster.nodes[2].controller_port}"
    for where in (
        ("--bootstrap-server", cluster.bootstrap),
        ("--bootstrap-controller", controller),
    ):
        status = shell.tool("kafka-metadata-quorum", *where, "describe", "--status").stdout
        leader = int(re.search(r"^LeaderId:\s+(\d)$", status, re.M).group(1))  # type: ignore[union-attr]
        voters = json.loads(re.search(r"^CurrentVoters:\s+(.*)$", status, re.M).group(1))  # type: ignore[union-attr]
        assert sorted(voter["id"] for voter in voters) == [1, 2, 3]
        assert [voter["endpoints"] for voter in sorted(voters, key=lambda v: v["id"])] == [
            [f"CONTROLLER://127.0.0.1:{cluster.nodes[n].controller_port}"] for n in (1, 2, 3)
        ]
        rows = shell.tool(
            "kafka-metadata-quorum", *where, "describe", "--replication"
        ).stdout.splitlines()[1:]
        roles = {int(row.split()[0]): row.split()[-1] for row in rows}
        assert roles == {n: "Leader" if n == leader else "Follower" for n in (1, 2, 3)}
        features = shell.tool("kafka-features", *where, "describe").stdout
        assert re.findall(r"^Feature: (\S+)", features, re.M) == [
            "eligible.leader.replicas.version",
            "group.version",
            "kraft.version",
            "metadata.version",
            "share.version",
            "transaction.version",
        ]


def _topic_id(connection: Connection, topic: str) -> Any:
    metadata = connection.request(
        3,
        12,
        {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    return metadata.topics[0].topic_id


def test_fetch_v18_answers_a_follower_behind_the_high_watermark_at_once(
    cluster: Cluster, shell: ToolShell, admin: AdminClient
) -> None:
    """KIP-1166: a follower's fetch names the high watermark it knows; a leader with a higher
    one answers at once instead of holding the fetch for data until max_wait."""
    topic = unique_topic("tool-fetch18")
    create_topic(shell, cluster, topic, "--partitions", "1", "--replication-factor", "3")
    produce(cluster, topic, 5)
    leader, members = replicas(admin, topic)[0]
    follower = next(n for n in members if n != leader)
    with Connection("127.0.0.1", cluster.nodes[leader].client_port or 0, timeout=30) as leader_link:
        topic_id = _topic_id(leader_link, topic)

        def fetch_as_follower(known_high_watermark: int, max_wait_ms: int) -> tuple[Any, float]:
            started = time.monotonic()
            response = leader_link.request(
                1,
                18,
                {
                    "replica_state": {"replica_id": follower, "replica_epoch": -1},
                    "max_wait": max_wait_ms,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [
                                {
                                    "partition": 0,
                                    "fetch_offset": 5,  # caught up: nothing to send
                                    "partition_max_bytes": 1 << 20,
                                    "high_watermark": known_high_watermark,
                                }
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                },
            )
            [answer] = response.responses[0].partitions
            return answer, time.monotonic() - started

        answer, elapsed = fetch_as_follower(3, max_wait_ms=20_000)
        assert (answer.error_code, answer.high_watermark) == (0, 5)
        assert elapsed < 10, f"held {elapsed:.1f} s although the follower knew 3 of 5"
        answer, elapsed = fetch_as_follower(5, max_wait_ms=300)
        assert (answer.error_code, answer.high_watermark) == (0, 5)
        assert elapsed >= 0.25, "answered before max_wait with nothing new"
