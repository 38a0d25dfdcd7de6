"""The APIs current clients and tools call beyond the classic set, over raw sockets to a real
server: the KIP-714 telemetry APIs as Kafka answers them without a telemetry plugin (served, never
advertised), client-metrics subscriptions as config resources (what kafka-client-metrics.sh
does, here with Moldau's admin client; Kafka's own tool in test_kafka_tools.py), ListConfigResources v0-1 (KIP-1000, KIP-1142),
DescribeCluster v2's fenced brokers (KIP-1073), and a request for an API the listener does not
serve (the connection is closed, as Kafka closes it).
"""

from __future__ import annotations

import socket
import struct
import uuid
from pathlib import Path

import pytest

from moldau.client.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    ResourceType,
    SyncAdminClient,
)
from moldau.client.errors import KafkaException
from moldau.protocol.errors import ErrorCode

from .cluster import COMBINED, build_cluster, wait_for
from .wire import Connection, create_topic

ZERO = uuid.UUID(int=0)
GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY, LIST_CONFIG_RESOURCES = 71, 72, 74


def _connect(server) -> Connection:
    return Connection(server.host, server.port, timeout=10)


def _api_versions(server) -> dict[int, tuple[int, int]]:
    with _connect(server) as connection:
        response = connection.request(
            18, 3, {"client_software_name": "wire-test", "client_software_version": "1"}
        )
    assert response.error_code == ErrorCode.none
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_the_telemetry_apis_are_not_advertised_and_list_config_resources_is(server) -> None:
    ranges = _api_versions(server)
    assert GET_TELEMETRY_SUBSCRIPTIONS not in ranges
    assert PUSH_TELEMETRY not in ranges
    assert ranges[LIST_CONFIG_RESOURCES] == (0, 1)
    assert ranges[60] == (0, 2)


def test_get_telemetry_subscriptions_answers_the_empty_default_subscription(server) -> None:
    with _connect(server) as connection:
        first = connection.request(GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})
        assert first.error_code == ErrorCode.none
        assert first.client_instance_id not in (None, ZERO)
        assert list(first.accepted_compression_types) == [4, 3, 1, 2]
        assert first.push_interval.total_seconds() == 300
        assert first.telemetry_max_bytes == 1_048_576
        assert first.delta_temporality is True
        assert list(first.requested_metrics) == []
        again = connection.request(
            GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": first.client_instance_id}
        )
    assert again.error_code == ErrorCode.throttling_quota_exceeded


def test_push_telemetry_is_checked_and_its_metrics_dropped(server) -> None:
    with _connect(server) as connection:
        refused = connection.request(
            PUSH_TELEMETRY,
            0,
            {
                "client_instance_id": ZERO,
                "subscription_id": 0,
                "terminating": False,
                "compression_type": 0,
                "metrics": b"",
            },
        )
        assert refused.error_code == ErrorCode.invalid_request
        subscription = connection.request(
            GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO}
        )
        push = {
            "client_instance_id": subscription.client_instance_id,
            "subscription_id": subscription.subscription_id,
            "terminating": False,
            "compression_type": 0,
            "metrics": b"\x0a\x00",
        }
        assert connection.request(PUSH_TELEMETRY, 0, push).error_code == ErrorCode.none
        too_soon = connection.request(PUSH_TELEMETRY, 0, push)
        assert too_soon.error_code == ErrorCode.throttling_quota_exceeded
        last = connection.request(PUSH_TELEMETRY, 0, {**push, "terminating": True})
        assert last.error_code == ErrorCode.none


def test_list_config_resources_v0_lists_client_metrics_resources_only(server) -> None:
    with _connect(server) as connection:
        create_topic(connection, "listed-v0")
        response = connection.request(LIST_CONFIG_RESOURCES, 0, {})
    assert response.error_code == ErrorCode.none
    assert list(response.config_resources) == []  # no client-metrics subscription exists


def test_list_config_resources_v1_lists_topics_and_brokers(server) -> None:
    with _connect(server) as connection:
        create_topic(connection, "listed-v1")
        everything = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
        topics = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": [2]})
        brokers = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": [4]})
        others = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": [8, 16, 32]})
    listed = {(r.resource_type, r.resource_name) for r in everything.config_resources}
    assert everything.error_code == ErrorCode.none
    assert (2, "listed-v1") in listed
    assert (4, "1") in listed
    assert {r.resource_type for r in topics.config_resources} == {2}
    assert "listed-v1" in {r.resource_name for r in topics.config_resources}
    assert [(r.resource_type, r.resource_name) for r in brokers.config_resources] == [(4, "1")]
    assert others.error_code == ErrorCode.none and list(others.config_resources) == []


def test_client_metrics_subscriptions_are_config_resources_that_match_clients(server) -> None:
    SET, DELETE = AlterConfigOp.SET, AlterConfigOp.DELETE
    wire_clients = ConfigResource(ResourceType.CLIENT_METRICS, "wire-clients")
    nobody = ConfigResource(ResourceType.CLIENT_METRICS, "nobody")
    with SyncAdminClient({"bootstrap.servers": f"{server.host}:{server.port}"}) as admin:
        admin.incremental_alter_configs(
            wire_clients,
            [
                ("metrics", SET, "org.apache.kafka.producer."),
                ("interval.ms", SET, "1000"),
                ("match", SET, "client_software_name=wire-.*,client_id=wire-test"),
            ],
        )
        admin.incremental_alter_configs(
            nobody, [("metrics", SET, "*"), ("match", SET, "client_id=x")]
        )
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs(wire_clients, [("interval.ms", SET, "50")])
        assert refused.value.code == ErrorCode.invalid_request
        assert refused.value.message == (
            "client_metrics 'wire-clients': Invalid value 50 for interval.ms, interval must be "
            "between 100 and 3600000 (1 hour)"
        )
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs(wire_clients, [("match", SET, "client_colour=red")])
        assert refused.value.code == ErrorCode.invalid_config
        assert refused.value.message == (
            "client_metrics 'wire-clients': Illegal client matching pattern: client_colour=red"
        )

        assert admin.list_config_resources([ResourceType.CLIENT_METRICS]) == [nobody, wire_clients]
        described = admin.describe_configs(wire_clients)
        assert {name: (e.value, e.source) for name, e in described.items()} == {
            "interval.ms": ("1000", ConfigSource.CLIENT_METRICS_CONFIG),
            "match": (
                "client_software_name=wire-.*,client_id=wire-test",
                ConfigSource.CLIENT_METRICS_CONFIG,
            ),
            "metrics": ("org.apache.kafka.producer.", ConfigSource.CLIENT_METRICS_CONFIG),
        }
        with _connect(server) as connection:
            listed = connection.request(LIST_CONFIG_RESOURCES, 0, {})
            assert [r.resource_name for r in listed.config_resources] == ["nobody", "wire-clients"]
            connection.request(
                18, 3, {"client_software_name": "wire-test", "client_software_version": "1"}
            )
            subscription = connection.request(
                GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO}
            )
        assert list(subscription.requested_metrics) == ["org.apache.kafka.producer."]
        assert subscription.push_interval.total_seconds() == 1

        # Deleting every config of a subscription removes it.
        for resource in (wire_clients, nobody):
            admin.incremental_alter_configs(
                resource, [(name, DELETE, None) for name in ("metrics", "interval.ms", "match")]
            )
        assert admin.list_config_resources([ResourceType.CLIENT_METRICS]) == []
        # Described as Kafka 4.1 describes any name: every config at its default.
        described = admin.describe_configs(wire_clients)
        assert {name: (e.value, e.source) for name, e in described.items()} == {
            "interval.ms": ("300000", ConfigSource.DEFAULT_CONFIG),
            "match": ("", ConfigSource.DEFAULT_CONFIG),
            "metrics": ("", ConfigSource.DEFAULT_CONFIG),
        }


@pytest.mark.parametrize("resource_types", [[1], [2, 64]])
def test_list_config_resources_refuses_an_unknown_resource_type(server, resource_types) -> None:
    with _connect(server) as connection:
        response = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": resource_types})
    assert response.error_code == ErrorCode.unsupported_version
    assert list(response.config_resources) == []


def test_an_api_of_the_controller_listener_closes_a_broker_connection(server) -> None:
    """BrokerRegistration (62) is served on controller listeners only: Kafka closes the
    connection ("... which is not enabled"), as for an API key it does not know at all."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(_bare(62, 0))
        assert _closed_by_server(sock)
    assert _api_versions(server)[18] == (0, 4)


def _bare(api_key: int, version: int) -> bytes:
    """A request header with no body (a flexible one: its empty tagged fields)."""
    body = struct.pack(">hhih", api_key, version, 9, -1) + b"\x00"
    return struct.pack(">i", len(body)) + body


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _describe_cluster(bootstrap: str, version: int, include_fenced: bool) -> dict[int, bool]:
    host, port = bootstrap.split(":")
    with Connection(host, int(port), timeout=10) as connection:
        response = connection.request(
            60,
            version,
            {
                "include_cluster_authorized_operations": False,
                "endpoint_type": 1,
                "include_fenced_brokers": include_fenced,
            },
        )
    assert response.error_code == ErrorCode.none
    return {b.broker_id: bool(getattr(b, "is_fenced", False)) for b in response.brokers}


def test_describe_cluster_v2_lists_fenced_brokers_when_asked(start_server, tmp_path: Path) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            "offsets.topic.num.partitions": "6",
            "transaction.state.log.num.partitions": "3",
        },
    )
    bootstrap = cluster.nodes[1].bootstrap
    wait_for(
        lambda: _describe_cluster(bootstrap, 2, True) == {1: False, 2: False, 3: False},
        timeout_s=30,
        what="every broker registered and unfenced",
    )
    cluster.kill(3)
    wait_for(
        lambda: _describe_cluster(bootstrap, 2, True) == {1: False, 2: False, 3: True},
        timeout_s=30,
        what="broker 3 fenced after its session",
    )
    assert _describe_cluster(bootstrap, 2, False) == {1: False, 2: False}
    assert _describe_cluster(bootstrap, 1, False) == {1: False, 2: False}


def test_list_config_resources_v1_lists_the_groups_with_configs(server) -> None:
    """(Last in the module: the test above expects no group configs yet.)"""
    change = {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
    with _connect(server) as connection:
        altered = connection.request(
            44,
            1,
            {
                "resources": [
                    {"resource_type": 32, "resource_name": "configured", "configs": [change]}
                ],
                "validate_only": False,
            },
        )
        groups = connection.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": [32]})
    assert altered.responses[0].error_code == ErrorCode.none
    assert [(r.resource_type, r.resource_name) for r in groups.config_resources] == [
        (32, "configured")
    ]
