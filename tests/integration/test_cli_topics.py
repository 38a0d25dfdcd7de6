"""`moldau topic ...`, `cluster info`, `config` and the error cases, as a user runs them."""

from __future__ import annotations

import socket

import pytest

from .support import unique_topic
from .test_cli_support import moldau
from .wire import Connection, find_coordinator

pytestmark = pytest.mark.timeout(120)


def test_topic_lifecycle_in_text_and_json(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-topic")
    created = moldau("topic", "create", topic, "-p", "3", "-c", "retention.ms=60000", bootstrap=b)
    assert created.text == f"Created topic {topic}.\n"

    with Connection(server.host, server.port) as connection:  # (created on first use)
        assert find_coordinator(connection, "a-group").error_code == 0
    names = moldau("topic", "list", bootstrap=b).text.splitlines()
    assert topic in names
    assert "__consumer_offsets" not in names  # internal topics only when asked for (as rpk)
    assert "__consumer_offsets" in moldau("topic", "list", "--internal", bootstrap=b).text
    listed = moldau("topic", "list", "--format", "json", bootstrap=b).json()
    assert {"name": topic, "partitions": 3, "replication_factor": 1, "internal": False} in listed
    assert not any(t["internal"] for t in listed)

    text = moldau("topic", "describe", topic, bootstrap=b).text
    first = text.splitlines()[0]
    assert first.startswith(f"Topic: {topic}\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000" in first
    assert f"\tTopic: {topic}\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1\t" in text

    described = moldau("topic", "describe", topic, "--format", "json", bootstrap=b).json()
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    configs = {c["name"]: c for c in described["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == (
        "60000",
        "topic",
    )
    assert configs["cleanup.policy"]["source"] == "default"

    changes = ["-c", "retention.ms=120000", "-c", "cleanup.policy=compact"]
    altered = moldau("topic", "alter-config", topic, *changes, bootstrap=b)
    assert altered.text == f"Completed updating config for topic {topic}.\n"
    moldau("topic", "alter-config", topic, "-d", "retention.ms", bootstrap=b)
    yaml_text = moldau("topic", "describe", topic, "--format", "yaml", bootstrap=b).text
    assert "  - name: cleanup.policy\n    value: compact\n    source: topic\n" in yaml_text
    assert '  - name: retention.ms\n    value: "604800000"\n    source: default\n' in yaml_text

    grown = moldau("topic", "add-partitions", topic, "-p", "5", bootstrap=b)
    assert grown.text == f"Topic {topic} now has 5 partitions.\n"
    described = moldau("topic", "describe", topic, "--format", "json", bootstrap=b).json()
    assert described["partition_count"] == 5

    assert moldau("topic", "delete", topic, bootstrap=b).text == f"Deleted topic {topic}.\n"
    assert topic not in moldau("topic", "list", bootstrap=b).text.splitlines()


def test_trim_moves_the_log_start_offset(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-trim")
    moldau("topic", "create", topic, "-p", "1", bootstrap=b)
    moldau("produce", topic, bootstrap=b, stdin=b"".join(b"r%d\n" % i for i in range(10)))
    trimmed = moldau("topic", "trim", topic, "-o", "4", bootstrap=b)
    assert trimmed.text.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 4",
    ]
    values = moldau("consume", topic, "-e", "-f", "%o:%s\\n", bootstrap=b).text.splitlines()
    assert values == [f"{i}:r{i}" for i in range(4, 10)]
    described = moldau("topic", "describe", topic, "--format", "json", bootstrap=b).json()
    assert (
        described["partitions"][0]["log_start_offset"],
        described["partitions"][0]["high_watermark"],
    ) == (4, 10)


def test_cluster_info_marks_the_controller(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    info = moldau("cluster", "info", "--format", "json", bootstrap=b).json()
    assert info["cluster_id"]
    assert info["brokers"] == [
        {
            "node_id": 1,
            "host": server.host,
            "port": server.port,
            "rack": None,
            "fenced": False,
            "controller": True,
        }
    ]
    assert info["quorum"]["leader_id"] == 1
    assert [(c["node_id"], c["status"], c["lag"]) for c in info["controllers"]] == [
        (1, "Leader", 0)
    ]
    assert {"name": "metadata.version", "finalized": 25, "supported": [25, 25]} in info["features"]
    text = moldau("cluster", "info", bootstrap=b).text
    assert f"1* {server.host} {server.port}" in text
    assert "METADATA QUORUM" in text and "FEATURES" in text


def test_broker_config_set_describe_delete(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers

    def entry() -> dict[str, object]:
        data = moldau("config", "describe", "--format", "json", bootstrap=b).json()
        return {c["name"]: c for c in data["configs"]}["log.retention.ms"]

    moldau("config", "set", "log.retention.ms=3600000", bootstrap=b)
    changed = entry()
    assert (changed["value"], changed["source"]) == ("3600000", "broker")
    moldau("config", "delete", "log.retention.ms", bootstrap=b)
    assert entry()["value"] != "3600000"


def test_broker_config_describe_all_adds_kafkas_configs_with_no_effect(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    listed = moldau("config", "describe", "--format", "json", bootstrap=b).json()["configs"]
    assert "num.network.threads" not in {c["name"] for c in listed}
    every = moldau("config", "describe", "--all", "--format", "json", bootstrap=b).json()
    threads = {c["name"]: c for c in every["configs"]}["num.network.threads"]
    assert threads["read_only"] and "event loop" in threads["no_effect"]
    assert len(every["configs"]) >= 300
    text = moldau("config", "describe", "--all", bootstrap=b).text
    assert "Kafka's configs with no effect in Moldau (read-only):" in text
    assert "\nnum.network.threads=3 (default): " in text


def test_client_metrics_alter_list_describe_delete(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    altered = moldau(
        "client-metrics",
        "alter",
        "java-producers",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "1000",
        "--match",
        "client_software_name=apache-kafka-java",
        bootstrap=b,
    )
    assert altered.text == "Altered client metrics config for java-producers.\n"
    moldau("client-metrics", "alter", "java-producers", "--interval", "2000", bootstrap=b)
    assert moldau("client-metrics", "list", bootstrap=b).text == "java-producers\n"
    described = moldau("client-metrics", "describe", "--format", "json", bootstrap=b).json()
    assert described == {
        "java-producers": {
            "interval.ms": "2000",
            "match": "client_software_name=apache-kafka-java",
            "metrics": "org.apache.kafka.producer.",
        }
    }
    assert moldau("client-metrics", "describe", "java-producers", bootstrap=b).text == (
        "Client metrics configs for java-producers are:\n  interval.ms=2000\n"
        "  match=client_software_name=apache-kafka-java\n  metrics=org.apache.kafka.producer.\n"
    )
    refused = moldau(
        "client-metrics", "alter", "java-producers", "--interval", "10", bootstrap=b, expect=None
    )
    assert refused.code != 0
    assert "interval must be between 100 and 3600000 (1 hour)" in _one_line_error(refused.stderr)
    moldau("client-metrics", "delete", "java-producers", bootstrap=b)
    assert moldau("client-metrics", "list", "--format", "json", bootstrap=b).json() == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{stderr}"
    assert "Traceback" not in stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_unreachable_broker_is_one_line_and_exit_code_3() -> None:
    address = f"127.0.0.1:{_free_port()}"
    result = moldau("topic", "list", bootstrap=address, expect=3)
    line = _one_line_error(result.stderr)
    assert address in line and "connection refused" in line and "-b HOST:PORT" in line


def test_user_mistakes_are_one_line_errors_with_exit_codes(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    missing = unique_topic("cli-missing")
    line = _one_line_error(moldau("topic", "describe", missing, bootstrap=b, expect=1).stderr)
    assert f"topic '{missing}' does not exist" in line and "moldau topic list" in line

    refused = moldau(  # the cluster auto-creates topics; this producer asks it not to
        "produce", missing, "-X", "allow.auto.create.topics=false", bootstrap=b, stdin=b"x\n",
        expect=1,
    )  # fmt: skip
    line = _one_line_error(refused.stderr)
    assert (
        line
        == f"error: topic '{missing}' does not exist; create it with `moldau topic create {missing}`"
    )
    line = _one_line_error(moldau("consume", missing, "-e", bootstrap=b, expect=1).stderr)
    assert "does not exist" in line

    topic = unique_topic("cli-bad-config")
    result = moldau("topic", "create", topic, "-c", "retention.ms=soon", bootstrap=b, expect=1)
    assert "INVALID_CONFIG" in _one_line_error(result.stderr)
    result = moldau("topic", "create", topic, "-c", "no.such.config=1", bootstrap=b, expect=1)
    assert "INVALID_CONFIG" in _one_line_error(result.stderr)
    assert topic not in moldau("topic", "list", bootstrap=b).text.splitlines()

    moldau("topic", "create", topic, bootstrap=b)
    line = _one_line_error(moldau("topic", "create", topic, bootstrap=b, expect=1).stderr)
    assert "already exists" in line
    assert moldau("topic", "create", topic, "--if-not-exists", bootstrap=b).code == 0

    line = _one_line_error(moldau("topic", "list", "-X", "linger=5", bootstrap=b, expect=2).stderr)
    assert "did you mean 'linger.ms'" in line
    line = _one_line_error(
        moldau("topic", "create", "x", "-c", "oops", bootstrap=b, expect=2).stderr
    )
    assert "not key=value" in line
    line = _one_line_error(moldau("consume", topic, "-o", "soon", bootstrap=b, expect=2).stderr)
    assert "beginning, end, stored" in line
    line = _one_line_error(moldau("consume", topic, "-p", "7", "-e", bootstrap=b, expect=1).stderr)
    assert "has no partition 7" in line
