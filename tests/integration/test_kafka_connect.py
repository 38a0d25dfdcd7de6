"""Kafka Connect (Apache Kafka 4.1) in distributed mode on Moldau, with Kafka's FileStream
connectors and Debezium's PostgreSQL connector, on one node and on three.

Per topology, one deployment (module fixtures): Moldau, a pair of workers in one group with
exactly-once source support enabled (KIP-618), their config/offset/status topics compacted and,
on three nodes, replicated three times as every topic the connectors create. The tests of a
topology run in file order on it, the one that kills processes last.

- FileStream source → topic → FileStream sink: the sink's file ends equal to the source's; the
  source's offsets reset (KIP-875, with a round of zombie fencing first) copy it once more.
- Debezium capturing a table (pgoutput) while transactions insert, update and delete its rows,
  with `exactly.once.support=required` (Debezium's PostgreSQL connector declares it supported):
  the worker running the task is SIGKILLed mid-stream, and on three nodes then the leader of a
  partition of the changes' topic. Read with read_committed, every change is there exactly once,
  in commit order for its row: each key's changes are the row's history (versions grow per key,
  over deletes too), with strictly growing LSNs.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from .cluster import COMBINED, LOOPBACK, Cluster, build_cluster
from .conftest import ServerFactory
from .kafka_connect import (
    DEBEZIUM_POSTGRES,
    FILE_SINK,
    FILE_SOURCE,
    ConnectWorker,
    WorkerConfig,
    WorkerGroup,
    connect_runtime,
)
from .kafka_jvm import KafkaJvm
from .postgres import PostgresServer
from .support import unique_topic, wait_until

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
KEYS = 40
CHUNK = 100  # transactions psql runs at a time
WORKER_SETTINGS = {
    "exactly.once.source.support": "enabled",
    # a worker that dies leaves the group within seconds, and its tasks move at once, not after
    # the five minutes Connect waits by default for it to come back
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "0",
    # The Java admin client keeps each partition's leader cached: a call it sends to a broker
    # that has just died waits for that broker until the call's deadline (60 s by default), and
    # a worker reading its config or offsets topic through such a call stalls as long. (These
    # reach every client of the worker: its own admin, producers and consumers, the tasks'.)
    "default.api.timeout.ms": "10000",
    "request.timeout.ms": "10000",
    # A task that starts reads the config topic to its end first, 3 s at most by default: when
    # its leader has just died, that is less than the cluster takes to elect another
    # (broker.session.timeout.ms, 9 s), and the task fails for good.
    "worker.sync.timeout.ms": "20000",
}


@dataclass
class Deployment:
    """Moldau (one node or a cluster), a PostgreSQL server and a pair of Connect workers."""

    bootstrap: str
    replication_factor: int
    workers: list[ConnectWorker]
    postgres: PostgresServer
    directory: Path
    cluster: Cluster | None = None


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    try:
        yield server
    finally:
        server.stop()


def _deploy(
    kafka_jvm: KafkaJvm,
    directory: Path,
    bootstrap: str,
    replication_factor: int,
    postgres: PostgresServer,
    cluster: Cluster | None = None,
) -> Iterator[Deployment]:
    config = WorkerConfig(
        bootstrap=bootstrap,
        group_id=unique_topic("connect"),
        replication_factor=replication_factor,
        settings=WORKER_SETTINGS,
    )
    with WorkerGroup(connect_runtime(kafka_jvm), directory=directory, config=config) as group:
        workers = group.start(2)
        yield Deployment(bootstrap, replication_factor, workers, postgres, directory, cluster)


@pytest.fixture(scope="module")
def one_node(
    module_server_factory: ServerFactory,
    postgres: PostgresServer,
    kafka_jvm: KafkaJvm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    server = module_server_factory()
    directory = tmp_path_factory.mktemp("connect-one-node")
    yield from _deploy(kafka_jvm, directory, server.bootstrap_servers, 1, postgres)


@pytest.fixture(scope="module")
def three_nodes(
    module_server_factory: ServerFactory,
    postgres: PostgresServer,
    kafka_jvm: KafkaJvm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("connect-three-nodes")
    cluster = build_cluster(module_server_factory, directory, roles=[COMBINED] * 3)
    yield from _deploy(kafka_jvm, directory, cluster.bootstrap, 3, postgres, cluster)


# --- FileStream --------------------------------------------------------------------------------


def _text_lines(count: int, seed: int) -> str:
    chooser = random.Random(seed)
    words = ["moldau", "connect", "worker", "task", "offset", "sink", "source", "ünïcode"]
    return "".join(
        f"{index} {' '.join(chooser.choices(words, k=chooser.randint(0, 8)))}\n"
        for index in range(count)
    )


def _file_round_trip(deployment: Deployment) -> None:
    name = unique_topic("file")
    source_file = deployment.directory / f"{name}-source.txt"
    sink_file = deployment.directory / f"{name}-sink.txt"
    text = _text_lines(3000, seed=deployment.replication_factor)
    source_file.write_text(text, encoding="utf-8")
    worker = deployment.workers[0]
    worker.put_connector(
        f"{name}-source",
        {
            "connector.class": FILE_SOURCE,
            "tasks.max": "1",
            "file": str(source_file),
            "topic": name,
            "value.converter": STRING_CONVERTER,
            # the worker creates the topic (KIP-158): one partition keeps the lines in order
            "topic.creation.default.partitions": "1",
            "topic.creation.default.replication.factor": str(deployment.replication_factor),
        },
    )
    worker.put_connector(
        f"{name}-sink",
        {
            "connector.class": FILE_SINK,
            "tasks.max": "1",
            "file": str(sink_file),
            "topics": name,
            "value.converter": STRING_CONVERTER,
        },
    )
    worker.wait_running(f"{name}-source")
    worker.wait_running(f"{name}-sink")

    def copied() -> bool:
        return sink_file.exists() and len(sink_file.read_bytes()) >= len(text.encode())

    wait_until(copied, timeout=90, message="the sink file as long as the source file")
    assert sink_file.read_text(encoding="utf-8") == text
    # KIP-875: the source's offsets reset while it is stopped (the leader first fences the
    # producers of its tasks, Admin.fenceProducers, then writes the reset in a transaction):
    # resumed, it reads the file from its start again.
    source = f"{name}-source"
    worker.accepted("PUT", f"/connectors/{source}/stop")
    worker.wait_stopped(source)
    worker.accepted("DELETE", f"/connectors/{source}/offsets")
    assert worker.request("GET", f"/connectors/{source}/offsets") == {"offsets": []}
    worker.accepted("PUT", f"/connectors/{source}/resume")
    wait_until(
        lambda: len(sink_file.read_bytes()) >= 2 * len(text.encode()),
        timeout=90,
        message="the source file copied a second time",
    )
    assert sink_file.read_text(encoding="utf-8") == text + text


def test_file_source_to_file_sink_on_one_node(one_node: Deployment) -> None:
    _file_round_trip(one_node)


def test_file_source_to_file_sink_on_three_nodes(three_nodes: Deployment) -> None:
    _file_round_trip(three_nodes)


# --- Debezium's PostgreSQL connector, exactly once ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One row change as the table saw it: the version a row had after an insert or update, or
    had when it was deleted (versions grow per key, over deletes too: each change is unique)."""

    key: int
    op: str  # Debezium's: c (insert), u (update), d (delete)
    version: int


class Workload:
    """Transactions of 1-4 changes over KEYS rows of `table`, in chunks for psql: the changes
    each key went through, in commit order (one session commits them one after the other)."""

    def __init__(self, table: str, seed: int) -> None:
        self.table = table
        self.chooser = random.Random(seed)
        self.versions: dict[int, int] = {}  # the version of each row present
        self.next_version: dict[int, int] = defaultdict(lambda: 1)
        self.changes: dict[int, list[Change]] = defaultdict(list)
        self.count = 0

    def chunk(self, transactions: int = CHUNK) -> str:
        statements = []
        for _ in range(transactions):
            statements.append("BEGIN;")
            for _ in range(self.chooser.randint(1, 4)):
                statements.append(self._change(self.chooser.randrange(KEYS)))
            statements.append("COMMIT;")
        return "\n".join(statements) + "\n"

    def _change(self, key: int) -> str:
        self.count += 1
        present = key in self.versions
        if present and self.chooser.random() < 0.25:
            version = self.versions.pop(key)
            self.changes[key].append(Change(key, "d", version))
            return f"DELETE FROM {self.table} WHERE id = {key};"
        version = self.versions[key] = self.next_version[key]
        self.next_version[key] += 1
        if not present:
            self.changes[key].append(Change(key, "c", version))
            return f"INSERT INTO {self.table} VALUES ({key}, {version}, 'row {key}');"
        self.changes[key].append(Change(key, "u", version))
        return f"UPDATE {self.table} SET version = {version} WHERE id = {key};"


@dataclass(frozen=True, slots=True)
class Captured:
    """A change as read from the topic: its LSN, partition and offset."""

    change: Change
    lsn: int
    partition: int
    offset: int


class ChangeReader:
    """Reads the connector's topic from the start with read_committed, as changes arrive."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-check",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.captured: list[Captured] = []

        def partitions() -> list[int] | None:
            # (a consumer's metadata requests create no topic: the connector creates it)
            found = self.consumer.list_topics(topic, timeout=5).topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                return None
            return sorted(found.partitions)

        found = wait_until(partitions, timeout=90, message=f"{topic} created by the connector")
        assert isinstance(found, list)
        self.partitions: list[int] = found
        self.consumer.assign([TopicPartition(topic, p, 0) for p in self.partitions])

    def read(self) -> int:
        for message in self.consumer.consume(1000, timeout=0.2):
            assert message.error() is None, message.error()
            value = json.loads(message.value())
            row = value["before"] if value["op"] == "d" else value["after"]
            self.captured.append(
                Captured(
                    Change(json.loads(message.key())["id"], value["op"], row["version"]),
                    value["source"]["lsn"],
                    message.partition(),
                    message.offset(),
                )
            )
        return len(self.captured)

    def read_until(self, count: int, what: str) -> None:
        wait_until(lambda: self.read() >= count, timeout=150, message=what)

    def read_to_end(self, count: int) -> None:
        """At least `count` changes, then on to each partition's end: every transaction in it
        decided, nothing behind the changes counted."""
        self.read_until(count, f"{count} changes captured")

        def at_end() -> bool:
            self.read()
            for partition in self.partitions:
                tp = TopicPartition(self.topic, partition)
                _, high = self.consumer.get_watermark_offsets(tp, timeout=5)
                if self.consumer.position([tp])[0].offset < high:
                    return False
            return True

        wait_until(at_end, timeout=60, message="every partition read to its end")

    def close(self) -> None:
        self.consumer.close()


def _mismatches(captured: list[Captured], expected: dict[int, list[Change]]) -> list[str]:
    """Each key whose captured changes (in topic order) are not its history, with what is wrong:
    duplicates, gaps, changes out of commit order."""
    by_key: dict[int, list[Captured]] = defaultdict(list)
    for item in sorted(captured, key=lambda c: (c.partition, c.offset)):
        by_key[item.change.key].append(item)
    problems = []
    for key in sorted(set(by_key) | set(expected)):
        got = [item.change for item in by_key[key]]
        lsns = [item.lsn for item in by_key[key]]
        wanted = expected.get(key, [])
        if got == wanted and lsns == sorted(set(lsns)):
            continue
        duplicated = len(got) - len(set(got))
        missing = [change for change in wanted if change not in got]
        problems.append(
            f"key {key}: {duplicated} duplicated, missing {missing[:3]}, LSNs {lsns[:8]}..., "
            f"captured {got[:6]}... expected {wanted[:6]}..."
        )
    return problems


def _debezium_config(
    deployment: Deployment, name: str, table: str, topic_prefix: str
) -> dict[str, str]:
    slot = name.replace("-", "_")
    return {
        "connector.class": DEBEZIUM_POSTGRES,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": LOOPBACK,
        "database.port": str(deployment.postgres.port),
        "database.user": "postgres",
        "database.password": "unused",  # (trusted)
        "database.dbname": "postgres",
        "topic.prefix": topic_prefix,
        "table.include.list": f"public.{table}",
        "slot.name": slot,
        "publication.name": f"{slot}_publication",
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "no_data",  # the table starts empty: every row arrives as a change
        "tombstones.on.delete": "false",
        "exactly.once.support": "required",
        "transaction.boundary": "poll",
        "topic.creation.default.partitions": "3",
        "topic.creation.default.replication.factor": str(deployment.replication_factor),
    }


def _capture_exactly_once(
    deployment: Deployment, kill_leader: Callable[[str], None] | None = None
) -> None:
    """Debezium captures a table while it changes; the worker running the task is SIGKILLed
    mid-stream (and, with `kill_leader`, the leader of a partition of the changes' topic)."""
    postgres = deployment.postgres
    name = unique_topic("pg")
    table = name.replace("-", "_")
    postgres.psql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, version int NOT NULL, note text);"
        f"ALTER TABLE {table} REPLICA IDENTITY FULL;"  # a delete carries the row it deleted
    )
    workers = deployment.workers
    workers[0].put_connector(name, _debezium_config(deployment, name, table, name))
    status = workers[0].wait_running(name)
    slot = name.replace("-", "_")
    wait_until(
        lambda: (
            postgres.psql(
                f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"
            ).strip()
            == "1"
        ),
        timeout=60,
        message="the connector's replication slot",
    )
    workload = Workload(table, seed=deployment.replication_factor)
    postgres.psql(workload.chunk())
    reader = ChangeReader(deployment.bootstrap, f"{name}.public.{table}")
    try:
        reader.read_until(workload.count // 2, "the first changes captured")
        victim = next(w for w in workers if w.worker_id == status["tasks"][0]["worker_id"])
        survivor = next(w for w in workers if w is not victim)
        postgres.psql(workload.chunk())  # being captured when the worker dies
        victim.kill()
        postgres.psql(workload.chunk())  # while no worker runs the task
        survivor.wait_running(name, on=survivor.worker_id)
        if kill_leader is not None:
            reader.read_until(reader.read() + 1, "changes captured after the task moved")
            postgres.psql(workload.chunk())
            kill_leader(reader.topic)
        postgres.psql(workload.chunk())
        reader.read_to_end(workload.count)
        problems = _mismatches(reader.captured, workload.changes)
        assert not problems, "\n".join(problems[:20])
        assert len(reader.captured) == workload.count
    finally:
        reader.close()


def test_debezium_postgres_exactly_once_as_a_worker_dies_on_one_node(
    one_node: Deployment,
) -> None:
    _capture_exactly_once(one_node)


def test_debezium_postgres_exactly_once_as_a_worker_and_a_leader_die_on_three_nodes(
    three_nodes: Deployment,
) -> None:
    cluster = three_nodes.cluster
    assert cluster is not None

    def kill_leader(topic: str) -> None:
        admin = AdminClient({"bootstrap.servers": three_nodes.bootstrap})
        cluster.kill(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader)

    _capture_exactly_once(three_nodes, kill_leader)
