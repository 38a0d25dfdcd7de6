"""Apache Kafka 4.1's own command-line tools against one Moldau node, as an operator runs them:
kafka-topics, kafka-configs (topics, brokers, `--describe --all` against the keys Kafka's own
brokers describe), kafka-consumer-groups, kafka-get-offsets, kafka-delete-records,
kafka-client-metrics, kafka-features, kafka-metadata-quorum, kafka-transactions and
kafka-broker-api-versions. Each test checks what the tool prints and the state it leaves, seen
through another client. (A three-node cluster: test_kafka_tools_cluster.py; kafka-acls:
test_kafka_tools_acls.py.)

Each tool run starts a JVM (about 1.5 s), so each test runs a workflow's commands in turn."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from .conftest import MoldauServer
from .kafka_jvm import KafkaJvm, ToolShell
from .support import unique_topic, wait_until

pytestmark = pytest.mark.timeout(240)


class Tools:
    """Kafka's tools pointed at one bootstrap address, run in one JVM (`ToolShell`)."""

    def __init__(self, shell: ToolShell, bootstrap: str) -> None:
        self.shell = shell
        self.bootstrap = bootstrap

    def __call__(self, name: str, *arguments: str, check: bool = True) -> str:
        """The tool's standard output (a non-zero exit fails the test when `check`)."""
        return self.run(name, *arguments, check=check).stdout

    def run(
        self, name: str, *arguments: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.shell.tool(name, "--bootstrap-server", self.bootstrap, *arguments, check=check)


@pytest.fixture(scope="module")
def shell(kafka_jvm: KafkaJvm) -> Iterator[ToolShell]:
    with kafka_jvm.shell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def tools(server: MoldauServer, shell: ToolShell) -> Tools:
    return Tools(shell, server.bootstrap_servers)


@pytest.fixture
def admin(server: MoldauServer) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap_servers})


def kafka_config_names(shell: ToolShell) -> dict[str, set[str]]:
    """The keys Kafka 4.1's brokers describe, by kind: those of its configuration reference,
    which KafkaConfig (broker) and LogConfig (topic) print."""
    names = {}
    for kind, main_class in (
        ("broker", "kafka.server.KafkaConfig"),
        ("topic", "org.apache.kafka.storage.internals.log.LogConfig"),
    ):
        reference = shell.run(main_class).stdout
        names[kind] = set(re.findall(rf'<a id="{kind}configs_([^"]+)"', reference))
    return names


def described_names(output: str) -> dict[str, str]:
    """name -> value of kafka-configs' `  name=value sensitive=... synonyms={...}` lines."""
    return dict(re.findall(r"^  ([^=\s]+)=(.*?) sensitive=", output, re.MULTILINE))


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes, int]]) -> None:
    """(partition, value, timestamp ms) each, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, value, timestamp in values:
        producer.produce(topic, value=value, partition=partition, timestamp=timestamp)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def test_kafka_topics_creates_describes_grows_lists_and_deletes(
    tools: Tools, admin: AdminClient
) -> None:
    topic = unique_topic("tool-topics")
    created = tools(
        "kafka-topics",
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
    )
    assert created == f"Created topic {topic}.\n"
    tools("kafka-topics", "--alter", "--topic", topic, "--partitions", "4")
    described = tools("kafka-topics", "--describe", "--topic", topic)
    header, *partitions = described.splitlines()
    assert re.match(
        rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 4\tReplicationFactor: 1\t"
        r"Configs: retention.ms=3600000$",
        header,
    ), described
    assert [line.split("\t")[2:6] for line in partitions] == [
        [f"Partition: {p}", "Leader: 1", "Replicas: 1", "Isr: 1"] for p in range(4)
    ]
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    assert topic in tools("kafka-topics", "--list").split()
    tools("kafka-topics", "--delete", "--topic", topic)
    wait_until(
        lambda: topic not in admin.list_topics(timeout=10).topics,
        message=f"{topic} deleted",
    )


def test_kafka_configs_alters_and_describes_topic_and_broker_configs(
    tools: Tools, admin: AdminClient, shell: ToolShell
) -> None:
    topic = unique_topic("tool-configs")
    tools("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    entity = ("--entity-type", "topics", "--entity-name", topic)
    tools(
        "kafka-configs",
        "--alter",
        *entity,
        "--add-config",
        "cleanup.policy=compact,max.message.bytes=2000000",
    )
    tools("kafka-configs", "--alter", *entity, "--delete-config", "cleanup.policy")
    dynamic = tools("kafka-configs", "--describe", *entity)
    assert dynamic.startswith(f"Dynamic configs for topic {topic} are:\n")
    assert described_names(dynamic) == {"max.message.bytes": "2000000"}
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert (configs["max.message.bytes"].value, configs["cleanup.policy"].value) == (
        "2000000",
        "delete",
    )
    kafka = kafka_config_names(shell)
    every_topic_config = described_names(tools("kafka-configs", "--describe", "--all", *entity))
    assert set(every_topic_config) == kafka["topic"]

    broker = ("--entity-type", "brokers", "--entity-name", "1")
    # The throttle kafka-reassign-partitions sets for moves between log dirs, and a log config.
    tools(
        "kafka-configs",
        "--alter",
        *broker,
        "--add-config",
        "log.cleaner.backoff.ms=20000,replica.alter.log.dirs.io.max.bytes.per.second=1048576",
    )
    every_broker_config = described_names(tools("kafka-configs", "--describe", "--all", *broker))
    # Kafka 4.1's keys, and what is set beyond them (as Kafka lists a property it does not
    # define): the throttle, and the test servers' schema.registry.listeners and
    # http.listeners (empty: no registry, no HTTP endpoints), nothing else
    assert set(every_broker_config) == kafka["broker"] | {
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "schema.registry.listeners",
        "http.listeners",
    }
    assert every_broker_config["broker.id"] == every_broker_config["node.id"] == "1"
    assert every_broker_config["replica.alter.log.dirs.io.max.bytes.per.second"] == "1048576"
    tools(
        "kafka-configs",
        "--alter",
        *broker,
        "--delete-config",
        "log.cleaner.backoff.ms,replica.alter.log.dirs.io.max.bytes.per.second",
    )
    assert described_names(tools("kafka-configs", "--describe", *broker)) == {}

    default = ("--entity-type", "brokers", "--entity-default")
    tools("kafka-configs", "--alter", *default, "--add-config", "log.cleaner.backoff.ms=30000")
    assert described_names(tools("kafka-configs", "--describe", *default)) == {
        "log.cleaner.backoff.ms": "30000"
    }
    tools("kafka-configs", "--alter", *default, "--delete-config", "log.cleaner.backoff.ms")
    broker_resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([broker_resource])[broker_resource].result(10)
    assert configs["log.cleaner.backoff.ms"].value == "15000"


def test_kafka_consumer_groups_lists_describes_resets_and_deletes(
    tools: Tools, server: MoldauServer
) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic("tool-groups")
    group = unique_topic("tool-group")
    tools("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    now = int(time.time() * 1000)
    produce(bootstrap, topic, [(i % 2, b"v%d" % i, now - 60_000 + i) for i in range(10)])
    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        member.subscribe([topic])
        seen: list[bytes] = []

        def read_all() -> bool:
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
            return len(seen) == 10

        wait_until(read_all, message="the member read every record")
        member.commit(asynchronous=False)
        assert group in tools("kafka-consumer-groups", "--list").split()
        members = tools("kafka-consumer-groups", "--describe", "--group", group, "--members")
        [row] = [line.split() for line in members.splitlines() if line.startswith(group)]
        assert row[-1] == "2"  # #PARTITIONS
    finally:
        member.close()

    described = tools("kafka-consumer-groups", "--describe", "--group", group)
    rows = sorted(line.split()[:6] for line in described.splitlines() if line.startswith(group))
    assert rows == [[group, topic, "0", "5", "5", "0"], [group, topic, "1", "5", "5", "0"]]
    state = tools("kafka-consumer-groups", "--describe", "--group", group, "--state")
    assert re.search(rf"^{group} +\S+ +\(1\) +\S+ +Empty +0$", state, re.MULTILINE), state

    reset = ("--reset-offsets", "--group", group)
    dry_run = tools("kafka-consumer-groups", *reset, "--topic", topic, "--to-earliest")
    assert sorted(line.split() for line in dry_run.splitlines() if line.startswith(group)) == [
        [group, topic, "0", "0"],
        [group, topic, "1", "0"],
    ]
    assert committed(bootstrap, group, topic, 2) == {0: 5, 1: 5}  # (without --execute)
    tools("kafka-consumer-groups", *reset, "--topic", f"{topic}:0", "--to-offset", "2", "--execute")
    tools("kafka-consumer-groups", *reset, "--all-topics", "--shift-by", "-1", "--execute")
    assert committed(bootstrap, group, topic, 2) == {0: 1, 1: 4}
    tools(
        "kafka-consumer-groups",
        *reset,
        "--topic",
        topic,
        "--to-datetime",
        time.strftime("%Y-%m-%dT%H:%M:%S.000", time.gmtime(now / 1000 - 3600)),
        "--execute",
    )
    assert committed(bootstrap, group, topic, 2) == {0: 0, 1: 0}

    deleted = tools(
        "kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", f"{topic}:1"
    )
    assert re.search(rf"^{topic} +1 +Successful", deleted, re.MULTILINE), deleted
    assert committed(bootstrap, group, topic, 2) == {0: 0, 1: -1001}
    assert tools("kafka-consumer-groups", "--delete", "--group", group) == (
        f"Deletion of requested consumer groups ('{group}') was successful.\n"
    )
    assert group not in tools("kafka-consumer-groups", "--list").split()


def test_kafka_get_offsets_and_kafka_delete_records(
    tools: Tools, server: MoldauServer, tmp_path: Path
) -> None:
    topic = unique_topic("tool-offsets")
    tools("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    base = int(time.time() * 1000) - 60_000
    # timestamps 0, 10, ... 90 ms after `base`, the largest at offset 7
    stamps = [0, 10, 20, 30, 40, 50, 60, 95, 80, 90]
    produce(
        server.bootstrap_servers, topic, [(0, b"v%d" % i, base + t) for i, t in enumerate(stamps)]
    )

    def offset_at(time_spec: str) -> str:
        output = tools("kafka-get-offsets", "--topic", topic, "--time", time_spec)
        return output.strip().rsplit(":", 1)[1]

    assert [offset_at(spec) for spec in ("-1", "-2", "-3", "-4", str(base + 25))] == [
        "10",
        "0",
        "7",  # the record with the largest timestamp
        "0",
        "3",
    ]
    # Nothing is tiered: the latest tiered offset is -1, as without remote storage in Kafka (the
    # tool leaves such a partition out)
    assert tools("kafka-get-offsets", "--topic", topic, "--time", "-5") == ""

    plan = tmp_path / "delete.json"
    plan.write_text(
        f'{{"version":1,"partitions":[{{"topic":"{topic}","partition":0,"offset":4}}]}}'
    )
    deleted = tools("kafka-delete-records", "--offset-json-file", str(plan))
    assert f"partition: {topic}-0\tlow_watermark: 4" in deleted
    assert [offset_at(spec) for spec in ("-2", "-4", "-1")] == ["4", "4", "10"]


def test_kafka_client_metrics_describes_every_config_of_a_subscription(tools: Tools) -> None:
    name = unique_topic("tool-metrics")
    altered = tools(
        "kafka-client-metrics",
        "--alter",
        "--name",
        name,
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "2000",
    )
    assert altered == f"Altered client metrics config for {name}.\n"
    assert name in tools("kafka-client-metrics", "--list").split()
    # No --match: the subscription matches every client, and Kafka describes `match=` so.
    assert tools("kafka-client-metrics", "--describe", "--name", name) == (
        f"Client metrics configs for {name} are:\n"
        "  interval.ms=2000\n"
        "  match=\n"
        "  metrics=org.apache.kafka.producer.\n"
    )
    tools("kafka-client-metrics", "--alter", "--name", name, "--match", "client_id=tool-.*")
    assert "  match=client_id=tool-.*\n" in tools(
        "kafka-client-metrics", "--describe", "--name", name
    )
    assert tools("kafka-client-metrics", "--delete", "--name", name) == (
        f"Deleted client metrics config for {name}.\n"
    )
    assert name not in tools("kafka-client-metrics", "--list").split()


def test_kafka_features_and_kafka_metadata_quorum_on_one_node(tools: Tools) -> None:
    features = {
        match.group(1): match.groups()[1:]
        for match in re.finditer(
            r"^Feature: (\S+)\tSupportedMinVersion: (\S+)\tSupportedMaxVersion: (\S+)\t"
            r"FinalizedVersionLevel: (\S+)\tEpoch: \d+$",
            tools("kafka-features", "describe"),
            re.MULTILINE,
        )
    }
    # Kafka 4.1's six, each with what Moldau has: no eligible leader replicas; share groups
    assert features == {
        "eligible.leader.replicas.version": ("0", "0", "0"),
        "group.version": ("0", "1", "1"),
        "kraft.version": ("0", "1", "0"),
        "metadata.version": ("4.0-IV3", "4.0-IV3", "4.0-IV3"),
        "share.version": ("0", "1", "1"),
        "transaction.version": ("0", "2", "2"),
    }
    status = tools("kafka-metadata-quorum", "describe", "--status")
    assert re.search(r"^LeaderId:\s+1$", status, re.MULTILINE), status
    assert re.search(r'^CurrentVoters:\s+\[\{"id": 1, ', status, re.MULTILINE), status
    replication = tools("kafka-metadata-quorum", "describe", "--replication").splitlines()
    assert replication[0].split() == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    [leader] = [row.split() for row in replication[1:]]
    assert (leader[0], leader[3], leader[-1]) == ("1", "0", "Leader")


def test_kafka_transactions_lists_and_describes_an_open_transaction(
    tools: Tools, server: MoldauServer
) -> None:
    topic = unique_topic("tool-txn")
    transactional_id = unique_topic("tool-writer")
    tools("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
    producer = Producer(
        {"bootstrap.servers": server.bootstrap_servers, "transactional.id": transactional_id}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(30) == 0
    listed = tools("kafka-transactions", "list")
    [row] = [line.split() for line in listed.splitlines() if line.startswith(transactional_id)]
    assert (row[1], row[3]) == ("1", "Ongoing")
    described = tools("kafka-transactions", "describe", "--transactional-id", transactional_id)
    [row] = [line.split("\t") for line in described.splitlines()[1:]]
    assert (row[1].strip(), row[4].strip(), row[8].strip()) == (
        transactional_id,
        "Ongoing",
        f"{topic}-0",
    )
    producers = tools(
        "kafka-transactions", "describe-producers", "--topic", topic, "--partition", "0"
    )
    [row] = [line.split() for line in producers.splitlines()[1:]]
    assert row[-1] == "0"  # CurrentTransactionStartOffset
    producer.commit_transaction(30)

    def state() -> str:
        described = tools("kafka-transactions", "describe", "--transactional-id", transactional_id)
        return str(described.splitlines()[1].split()[4])

    # EndTxn is answered once PrepareCommit is durable, before the markers are written (as in
    # Kafka): the describe may see PrepareCommit first, then CompleteCommit and nothing else.
    seen: list[str] = []
    wait_until(
        lambda: seen.append(state()) or seen[-1] == "CompleteCommit",
        message="the transaction never described as CompleteCommit",
    )
    assert set(seen) <= {"PrepareCommit", "CompleteCommit"}, seen


def test_kafka_broker_api_versions_lists_what_kafka_4_1_serves_on_brokers(tools: Tools) -> None:
    output = tools("kafka-broker-api-versions")
    assert re.search(r"\tFetch\(1\): 4 to 18 \[usable: 18\],", output), output
    assert re.search(r"\tListOffsets\(2\): 1 to 11 \[usable: 10\],", output), output
