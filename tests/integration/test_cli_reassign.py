"""`moldau cluster reassign ...` as an operator runs kafka-reassign-partitions.sh, against one
cluster of three processes with two log dirs each for the whole module: generate → execute with
a throttle → verify until complete moves every replica off a broker with no record lost; a
reassignment held back by a low throttle is listed, reported in progress, and cancelled; a
reassignment naming log dirs puts the replicas there (kafka-log-dirs.sh's `moldau cluster
log-dirs describe` shows them); bad files, targets and dirs are one error line each."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from .cluster import COMBINED, Cluster, build_cluster, wait_for
from .conftest import ServerFactory
from .support import unique_topic
from .test_cli_support import CliResult, moldau
from .test_cli_topics import _one_line_error
from .test_cluster_replication import FAST

pytestmark = pytest.mark.timeout(240)

THROTTLES = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@pytest.fixture(scope="module")
def cluster(
    module_server_factory: ServerFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three combined nodes with two log dirs each (`node-N`, `node-N-b`); small replica
    fetches so that a throttle holds a catch-up back. The module's server factory stops every
    node (by PID) when the module ends."""
    base = tmp_path_factory.mktemp("reassign")
    yield build_cluster(
        module_server_factory,
        base,
        roles=[COMBINED] * 3,
        extra={**FAST, "replica.fetch.max.bytes": "65536"},
        per_node={
            n: {"log.dirs": f"{base / f'node-{n}'},{base / f'node-{n}-b'}"} for n in (1, 2, 3)
        },
    )


def _log_dirs(cluster: Cluster, broker: int) -> list[Path]:
    data_dir = cluster.nodes[broker].data_dir
    return [data_dir, data_dir.with_name(f"{data_dir.name}-b")]


def _reassign(cluster: Cluster, *arguments: str, expect: int | None = 0) -> CliResult:
    return moldau("cluster", "reassign", *arguments, bootstrap=cluster.bootstrap, expect=expect)


def _describe(cluster: Cluster, topic: str) -> dict:
    return moldau(
        "topic", "describe", topic, "--format", "json", bootstrap=cluster.bootstrap
    ).json()


def _replicas(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    return {p["partition"]: p["replicas"] for p in _describe(cluster, topic)["partitions"]}


def _topic_overrides(cluster: Cluster, topic: str) -> dict[str, str]:
    return {
        c["name"]: c["value"]
        for c in _describe(cluster, topic)["configs"]
        if c["source"] == "topic"
    }


def _broker_rates(cluster: Cluster, broker: int) -> dict[str, str]:
    data = moldau(
        "config",
        "describe",
        "--broker",
        str(broker),
        "--format",
        "json",
        bootstrap=cluster.bootstrap,
    ).json()
    return {
        c["name"]: c["value"]
        for c in data["configs"]
        if c["name"] in RATES and c["source"] == "broker"
    }


def _one_replica_topic(cluster: Cluster, prefix: str) -> tuple[str, int, int]:
    """A new topic of one partition and one replica: its name, the replica's broker and
    another broker (1 or 2)."""
    topic = unique_topic(prefix)
    moldau("topic", "create", topic, "-p", "1", "-r", "1", bootstrap=cluster.bootstrap)
    [source] = _replicas(cluster, topic)[0]
    return topic, source, 1 if source != 1 else 2


def _produce(cluster: Cluster, topic: str, count: int, size: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    values = [b"%06d:" % i + b"v" * size for i in range(count)]
    for value in values:
        producer.produce(topic, value=value)
        producer.poll(0)
    assert producer.flush(60) == 0
    return values


def _consume_all(cluster: Cluster, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": unique_topic("audit"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ConfluentPartition(topic, p, 0) for p in range(partitions)])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(read) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.value())
    consumer.close()
    return read


def test_generate_execute_verify_moves_every_replica_off_a_broker(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic = unique_topic("moving")
    moldau("topic", "create", topic, "-p", "3", "-r", "2", bootstrap=cluster.bootstrap)
    wait_for(
        lambda: all(len(p["isr"]) == 2 for p in _describe(cluster, topic)["partitions"]),
        timeout_s=20,
        what="every replica in sync",
    )
    before = _replicas(cluster, topic)
    assert any(1 in replicas for replicas in before.values())
    values = _produce(cluster, topic, 3000, 500)

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = _reassign(
        cluster, "generate", "--topics-to-move-json-file", str(topics_file), "--broker-list", "2,3"
    ).text.splitlines()
    assert generated[0] == "Current partition replica assignment"
    assert json.loads(generated[1]) == {
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
            for p, r in sorted(before.items())
        ],
    }
    assert generated[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(generated[4])
    target = {e["partition"]: e["replicas"] for e in proposed["partitions"]}
    assert sorted(target) == [0, 1, 2]
    assert all(sorted(r) == [2, 3] for r in target.values())
    plan = tmp_path / "plan.json"
    plan.write_text(generated[4])

    rate = str(4 * 1024 * 1024)
    executed = _reassign(
        cluster, "execute", "--reassignment-json-file", str(plan), "--throttle", rate
    ).text.splitlines()
    assert executed[0] == "Current partition replica assignment"
    assert json.loads(executed[2]) == json.loads(generated[1])  # the rollback file
    assert f"The inter-broker throttle limit was set to {rate} B/s" in executed
    moving = sorted(p for p in target if target[p] != before[p])
    assert executed[-1] == "Successfully started partition reassignments for " + ",".join(
        f"{topic}-{p}" for p in sorted(target)
    )
    # The throttles as Kafka's tool sets them: every current replica of a moving partition on
    # the leader side, the replicas it gains on the follower side, the rate on every broker.
    overrides = _topic_overrides(cluster, topic)
    assert overrides["leader.replication.throttled.replicas"] == ",".join(
        f"{p}:{b}" for p in moving for b in before[p]
    )
    assert overrides["follower.replication.throttled.replicas"] == ",".join(
        f"{p}:{b}" for p in moving for b in target[p] if b not in before[p]
    )
    for broker in (1, 2, 3):
        assert _broker_rates(cluster, broker) == dict.fromkeys(RATES, rate)

    def verified() -> CliResult | None:
        result = _reassign(cluster, "verify", "--reassignment-json-file", str(plan), expect=None)
        assert result.code in (0, 4), result.stderr
        return result if result.code == 0 else None

    result = wait_for(verified, timeout_s=90, what="the reassignment verified complete")
    assert isinstance(result, CliResult)
    lines = result.text.splitlines()
    assert lines[0] == "Status of partition reassignment:"
    assert [f"Reassignment of partition {topic}-{p} is completed." for p in range(3)] == lines[1:4]
    assert "Clearing broker-level throttles on brokers 1,2,3" in lines
    assert f"Clearing topic-level throttles on topics {topic}" in lines

    assert _replicas(cluster, topic) == target
    assert not set(THROTTLES) & set(_topic_overrides(cluster, topic))
    for broker in (1, 2, 3):
        assert _broker_rates(cluster, broker) == {}
    wait_for(
        lambda: (
            not any(
                (log_dir / f"{topic}-{p}").exists()
                for log_dir in _log_dirs(cluster, 1)
                for p in range(3)
            )
        ),
        timeout_s=20,
        what="broker 1's logs of the topic deleted",
    )
    # Every record, read from the new replicas (broker 1 holds none any more).
    assert sorted(_consume_all(cluster, topic, 3, len(values))) == sorted(values)

    verified_json = _reassign(
        cluster, "verify", "--reassignment-json-file", str(plan), "--format", "json"
    ).json()
    assert [p["status"] for p in verified_json["partitions"]] == ["complete"] * 3


def test_a_throttled_reassignment_is_listed_in_progress_and_cancelled(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic, source, joining = _one_replica_topic(cluster, "held")
    _produce(cluster, topic, 1000, 1000)  # ~1 MB: 64 KiB fetches at 1 KB/s take minutes
    plan = tmp_path / "held.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": 0, "replicas": [source, joining]}],
            }
        )
    )

    _reassign(cluster, "execute", "--reassignment-json-file", str(plan), "--throttle", "1000")
    listed = _reassign(cluster, "list", "--format", "json").json()
    assert listed == [
        {
            "topic": topic,
            "partition": 0,
            "replicas": [source, joining],
            "adding_replicas": [joining],
            "removing_replicas": [],
        }
    ]
    assert _reassign(cluster, "list").text.splitlines() == [
        "Current partition reassignments:",
        f"{topic}-0: replicas: {source},{joining}. adding: {joining}. removing: .",
    ]
    # A second execute is refused while this one runs.
    line = _one_line_error(
        _reassign(cluster, "execute", "--reassignment-json-file", str(plan), expect=1).stderr
    )
    assert "reassignments in progress" in line and "--additional" in line

    pending = _reassign(cluster, "verify", "--reassignment-json-file", str(plan), expect=4)
    assert pending.text.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is still in progress.",
    ]
    assert _topic_overrides(cluster, topic)["follower.replication.throttled.replicas"] == (
        f"0:{joining}"
    )

    cancelled = _reassign(cluster, "cancel", "--reassignment-json-file", str(plan)).text
    assert cancelled.splitlines()[0] == (
        f"Successfully cancelled partition reassignments for: {topic}-0"
    )
    assert _reassign(cluster, "list").text == "No partition reassignments found.\n"
    assert _reassign(cluster, "list", "--format", "json").json() == []
    wait_for(
        lambda: _replicas(cluster, topic) == {0: [source]},
        timeout_s=10,
        what="the replicas back as they were",
    )
    assert not set(THROTTLES) & set(_topic_overrides(cluster, topic))
    for broker in (1, 2, 3):
        assert _broker_rates(cluster, broker) == {}

    failed = _reassign(cluster, "verify", "--reassignment-json-file", str(plan), expect=1)
    assert failed.text.splitlines()[1] == (
        f"There is no active reassignment of partition {topic}-0, but replica set is "
        f"[{source}] rather than [{source}, {joining}]."
    )
    again = _reassign(cluster, "cancel", "--reassignment-json-file", str(plan)).text
    assert again.splitlines()[0] == "None of the specified partition reassignments are active."


def test_bad_files_and_targets_are_one_line_errors(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique_topic("refused")
    moldau("topic", "create", topic, "-p", "1", "-r", "1", bootstrap=cluster.bootstrap)
    [current] = _replicas(cluster, topic).values()
    assert "not in the cluster" in _one_line_error(
        moldau(
            "cluster",
            "log-dirs",
            "describe",
            "--broker-list",
            "1,9",
            bootstrap=cluster.bootstrap,
            expect=1,
        ).stderr
    )
    assert "broker ids separated by commas" in _one_line_error(
        moldau(
            "cluster",
            "log-dirs",
            "describe",
            "--broker-list",
            "x",
            bootstrap=cluster.bootstrap,
            expect=2,
        ).stderr
    )

    def execute(data: object, expect: int) -> str:
        path = tmp_path / "plan.json"
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        result = _reassign(cluster, "execute", "--reassignment-json-file", str(path), expect=expect)
        return _one_line_error(result.stderr)

    def entry(**fields: object) -> dict:
        return {"version": 1, "partitions": [{"topic": topic, "partition": 0, **fields}]}

    assert "not valid JSON" in execute('{"version":1,"partitions":[', 2)
    assert "duplicate replicas" in execute(entry(replicas=[1, 2, 1]), 2)
    assert "must be an absolute path" in execute(entry(replicas=[1], log_dirs=["data/x"]), 2)
    line = execute(entry(replicas=[current[0]], log_dirs=["/data/x"]), 1)
    known = ", ".join(str(d) for d in _log_dirs(cluster, current[0]))
    assert f"broker {current[0]} has no log dir /data/x (its log dirs: {known})" in line
    missing = unique_topic("missing")
    line = execute({"partitions": [{"topic": missing, "partition": 0, "replicas": [1]}]}, 1)
    assert f"topic '{missing}' does not exist" in line
    assert f"topic '{topic}' has no partition 5" in execute(
        {"partitions": [{"topic": topic, "partition": 5, "replicas": [1]}]}, 1
    )
    assert "broker 9 is not in the cluster" in execute(entry(replicas=[1, 9]), 1)
    assert _reassign(cluster, "list", "--format", "json").json() == []
    assert _replicas(cluster, topic) == {0: current}

    line = _one_line_error(
        _reassign(
            cluster, "verify", "--reassignment-json-file", str(tmp_path / "none.json"), expect=2
        ).stderr
    )
    assert "cannot read the reassignment JSON file" in line
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": topic}]}))
    line = _one_line_error(
        _reassign(
            cluster,
            "generate",
            "--topics-to-move-json-file",
            str(topics_file),
            "--broker-list",
            "1,7",
            expect=1,
        ).stderr
    )
    assert "broker 7 is not in the cluster" in line


def _describe_log_dirs(cluster: Cluster, *arguments: str) -> list[dict]:
    return moldau(
        "cluster",
        "log-dirs",
        "describe",
        *arguments,
        "--format",
        "json",
        bootstrap=cluster.bootstrap,
    ).json()


def test_a_reassignment_naming_log_dirs_moves_the_replicas_into_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic, source, joining = _one_replica_topic(cluster, "placed")
    _produce(cluster, topic, 300, 1000)

    [described] = _describe_log_dirs(cluster, "--broker-list", str(source), "--topic-list", topic)
    assert described["broker"] == source
    assert [d["log_dir"] for d in described["log_dirs"]] == [
        str(d) for d in _log_dirs(cluster, source)
    ]
    [(current_dir, replica)] = [
        (d["log_dir"], r) for d in described["log_dirs"] for r in d["replicas"]
    ]
    assert replica["topic"] == topic and replica["size"] > 300 * 1000
    assert not replica["is_future"]
    [other_dir] = [str(d) for d in _log_dirs(cluster, source) if str(d) != current_dir]
    joining_dir = str(_log_dirs(cluster, joining)[1])

    plan = tmp_path / "placed.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": topic,
                        "partition": 0,
                        "replicas": [source, joining],
                        "log_dirs": [other_dir, joining_dir],
                    }
                ],
            }
        )
    )
    # the joining broker has no replica at first: its move starts once the reassignment made it
    executed = _reassign(
        cluster, "execute", "--reassignment-json-file", str(plan), "--timeout", "30000"
    ).text.splitlines()
    assert executed[-3] == f"Successfully started partition reassignments for {topic}-0"
    assert sorted(executed[-2:]) == sorted(
        f"Successfully started moving log directory to {log_dir} for replica {topic}-0 "
        f"with broker {broker}"
        for broker, log_dir in ((source, other_dir), (joining, joining_dir))
    )

    def verified() -> CliResult | None:
        result = _reassign(cluster, "verify", "--reassignment-json-file", str(plan), expect=None)
        assert result.code in (0, 4), result.text + result.stderr
        return result if result.code == 0 else None

    result = wait_for(verified, timeout_s=60, what="the replicas in their log dirs")
    assert isinstance(result, CliResult)
    lines = result.text.splitlines()
    assert lines[:2] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
    ]
    assert lines[2:4] == [
        f"Reassignment of replica {topic}-0 on broker {b} completed successfully."
        for b in sorted((source, joining))
    ]

    # on disk: each replica in the dir the file named, none left in the other
    for broker, log_dir in ((source, other_dir), (joining, joining_dir)):
        assert (Path(log_dir) / f"{topic}-0").is_dir()
        for elsewhere in _log_dirs(cluster, broker):
            if str(elsewhere) != log_dir:
                assert not (elsewhere / f"{topic}-0").exists()

    # kafka-log-dirs.sh's lines: every broker, both dirs each, the replicas and their sizes
    text = moldau(
        "cluster", "log-dirs", "describe", "--topic-list", topic, bootstrap=cluster.bootstrap
    ).text.splitlines()
    assert text[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2,3",
    ]
    kafka = json.loads(text[2])
    assert kafka["version"] == 1
    placed = {
        (broker["broker"], log_dir["logDir"]): log_dir["partitions"]
        for broker in kafka["brokers"]
        for log_dir in broker["logDirs"]
    }
    assert set(placed) == {(b, str(d)) for b in (1, 2, 3) for d in _log_dirs(cluster, b)}
    assert all(log_dir["error"] is None for b in kafka["brokers"] for log_dir in b["logDirs"])
    for broker, log_dir in ((source, other_dir), (joining, joining_dir)):
        [partition] = placed.pop((broker, log_dir))
        assert partition["partition"] == f"{topic}-0" and not partition["isFuture"]
        assert partition["size"] > 300 * 1000
    assert not any(placed.values())
