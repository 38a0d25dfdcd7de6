"""The `moldau server` process: where its settings come from, its defaults, clean stops on SIGTERM
and SIGINT, and independent servers side by side."""

from __future__ import annotations

import signal
import socket

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from . import rdkafka
from .support import DEADLINE_S, Record, assert_same_records, now_ms, unique_topic


def broker_configs(bootstrap: str) -> dict[str, str]:
    admin = rdkafka.admin_client(bootstrap)
    [node] = admin.describe_cluster().result(timeout=DEADLINE_S).nodes
    resource = ConfigResource(ResourceType.BROKER, str(node.id))
    entries = admin.describe_configs([resource])[resource].result(timeout=DEADLINE_S)
    return {name: entry.value for name, entry in entries.items()}


def test_settings_come_from_file_then_environment_then_overrides(start_server, tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# a Kafka-style properties file\n"
        "num.partitions=2\n"
        "log.retention.ms=1000001\n"
        "message.max.bytes=2000001\n"
    )
    environment = {"MOLDAU_LOG_RETENTION_MS": "1000002", "MOLDAU_MESSAGE_MAX_BYTES": "2000002"}

    server = start_server(
        arguments=["-c", str(properties)], environment=environment, message_max_bytes="2000003"
    )

    configs = broker_configs(server.bootstrap_servers)
    assert configs["num.partitions"] == "2"  # from the file
    assert configs["log.retention.ms"] == "1000002"  # the environment beats the file
    assert configs["message.max.bytes"] == "2000003"  # --override beats both


def test_without_configuration_listens_on_9092_with_data_in_moldau_data(start_server, tmp_path):
    probe = socket.socket()
    try:
        probe.bind(("127.0.0.1", 9092))
    except OSError:
        pytest.skip("port 9092 is in use by another process on this machine")
    finally:
        probe.close()
    working_dir = tmp_path / "cwd"
    working_dir.mkdir()

    server = start_server(isolated=False, working_dir=working_dir)

    assert server.bootstrap_servers == "127.0.0.1:9092"
    assert (working_dir / "moldau-data").is_dir()
    topic = unique_topic("defaults")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    assert (working_dir / "moldau-data" / f"{topic}-0").is_dir()


def test_sigint_stops_cleanly_and_keeps_the_data(start_server):
    server = start_server()
    topic = unique_topic("sigint")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    records = [Record(key=b"k", value=b"v%d" % i, timestamp_ms=now_ms()) for i in range(5)]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records)

    server.stop(signal.SIGINT)  # asserts exit code 0
    server.start()

    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, sent, partitions=1)
    assert_same_records(sent, consumed)


def test_two_servers_with_own_listeners_and_log_dirs_are_independent(start_server):
    first, second = start_server(), start_server()
    assert first.port != second.port
    topic = unique_topic("twins")
    rdkafka.create_topic(first.bootstrap_servers, topic, partitions=1)
    rdkafka.create_topic(second.bootstrap_servers, topic, partitions=2)

    to_first = rdkafka.produce(
        first.bootstrap_servers,
        topic,
        [Record(key=None, value=b"first %d" % i, timestamp_ms=now_ms()) for i in range(3)],
    )
    to_second = rdkafka.produce(
        second.bootstrap_servers,
        topic,
        [Record(key=None, value=b"second", timestamp_ms=now_ms(), partition=1)],
    )

    assert_same_records(
        to_first, rdkafka.consume_all(first.bootstrap_servers, topic, to_first, partitions=1)
    )
    assert_same_records(
        to_second, rdkafka.consume_all(second.bootstrap_servers, topic, to_second, partitions=2)
    )
