"""The pure pieces of a node's metrics and health endpoints: `http.listeners` settings,
readiness, the request histogram's buckets and Kafka's API names, group lag."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from moldau.broker.observability.endpoints import HostedHttp, render
from moldau.broker.observability.readiness import NodeState, readiness
from moldau.broker.observability.request_metrics import (
    BUCKET_BOUNDS_MS,
    RequestMetrics,
    api_name,
)
from moldau.broker.observability.snapshot import (
    BrokerSnapshot,
    NodeSnapshot,
    QuorumSnapshot,
    group_lag,
)
from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig, ConfigError
from moldau.coordinator.store import CommittedOffset
from moldau.http_server import HttpListener
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition
from tests.certificates import make_certificates

CLUSTER = {
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1",
}


def hosted(**properties: str) -> HostedHttp:
    config = BrokerConfig(properties)
    return HostedHttp.of(config, ClusterLayout.from_config(config))


def test_a_single_node_serves_http_on_9644_unless_told_otherwise() -> None:
    default = hosted()
    assert (default.listeners, default.explicit) == ([HttpListener("127.0.0.1", 9644)], False)
    assert hosted(**{"http.listeners": ""}).listeners == []
    moved = hosted(**{"http.listeners": "http://0.0.0.0:0"})
    assert (moved.listeners, moved.explicit) == ([HttpListener("0.0.0.0", 0)], True)


def test_a_node_of_a_larger_cluster_serves_http_only_when_told() -> None:
    assert hosted(**CLUSTER).listeners == []
    told = hosted(**CLUSTER, **{"http.listeners": "http://127.0.0.1:0"})
    assert told.listeners == [HttpListener("127.0.0.1", 0)]


@pytest.mark.parametrize("value", ["127.0.0.1:9644", "ftp://127.0.0.1:1", "http://host"])
def test_a_malformed_value_is_one_line_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        hosted(**{"http.listeners": value})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Invalid value {value} for configuration http.listeners: ")


def test_https_needs_the_nodes_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="https listener but the node has no key"):
        hosted(**{"http.listeners": "https://127.0.0.1:0"})
    certificates = make_certificates(tmp_path)
    secured = hosted(
        **{
            "http.listeners": "https://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
        }
    )
    assert secured.ssl_context is not None


SERVING = NodeState(
    starting=None,
    broker_in_cluster=True,
    controller_only=False,
    registered=True,
    fenced=False,
    metadata_offset=41,
    quorum_high_watermark=42,
    quorum_leader=2,
)


def test_a_broker_serving_its_cluster_is_ready() -> None:
    assert readiness(SERVING) == (True, "ready")


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (replace(SERVING, starting="recovering the logs"), "recovering the logs"),
        (replace(SERVING, starting="shutting down"), "shutting down"),
        (replace(SERVING, registered=False), "not registered with the controller"),
        (replace(SERVING, fenced=True), "fenced by the controller"),
        (
            replace(SERVING, metadata_offset=30),
            "catching up with the metadata log (at offset 30 of 41)",
        ),
        (
            replace(SERVING, broker_in_cluster=False, controller_only=True, quorum_leader=None),
            "the metadata quorum has no leader",
        ),
    ],
)
def test_a_node_not_serving_says_why(state: NodeState, reason: str) -> None:
    assert readiness(state) == (False, reason)


def test_a_single_node_needs_no_registration_and_serves_without_a_known_leader() -> None:
    alone = replace(SERVING, broker_in_cluster=False, registered=False, fenced=True)
    assert readiness(replace(alone, quorum_leader=None)) == (True, "ready")


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.PRODUCE) == "Produce"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert api_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert api_name(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS) == "DescribeUserScramCredentials"


def test_each_answer_falls_in_the_first_bucket_its_time_fits() -> None:
    metrics = RequestMetrics()
    started = metrics.taken(ApiKey.FETCH)
    metrics.answered(ApiKey.FETCH, started)  # well under the first bound
    metrics.answered(ApiKey.FETCH, started - 0.003)  # 3 ms and a little: the 5 ms bucket
    metrics.answered(ApiKey.FETCH, started - 60)  # past the last bound: +Inf
    buckets = metrics.buckets[ApiKey.FETCH]
    assert metrics.requests[ApiKey.FETCH] == 1
    assert buckets[0] == 1
    assert buckets[BUCKET_BOUNDS_MS.index(5)] == 1
    assert buckets[-1] == 1 and len(buckets) == len(BUCKET_BOUNDS_MS) + 1
    assert 60.003 < metrics.seconds[ApiKey.FETCH] < 61


def test_group_lag_is_behind_the_replicas_high_watermark_and_never_negative() -> None:
    def replica(high_watermark: int) -> SimpleNamespace:
        return SimpleNamespace(log=SimpleNamespace(high_watermark=high_watermark))

    replica_manager = SimpleNamespace(
        partitions={TopicPartition("t", 0): replica(10), TopicPartition("t", 1): replica(3)}
    )
    committed = [
        CommittedOffset("g", "t", 0, 4),
        CommittedOffset("g", "t", 1, 5),  # (a follower's high watermark may trail the commit)
        CommittedOffset("g", "elsewhere", 0, 1),  # no replica here: left out
    ]
    assert list(group_lag(committed, replica_manager)) == [  # type: ignore[arg-type]
        (committed[0], 6),
        (committed[1], 0),
    ]


def test_a_snapshot_renders_as_prometheus_text_with_kafkas_names() -> None:
    requests = [0] * (max(ApiKey) + 1)
    buckets = [[0] * (len(BUCKET_BOUNDS_MS) + 1) for _ in requests]
    seconds = [0.0] * len(requests)
    requests[ApiKey.PRODUCE] = 3
    buckets[ApiKey.PRODUCE][0], buckets[ApiKey.PRODUCE][4] = 2, 1  # <= 0.5 ms, <= 10 ms
    seconds[ApiKey.PRODUCE] = 0.0061
    snapshot = NodeSnapshot(
        requests=requests,
        request_buckets=buckets,
        request_seconds=seconds,
        connections=[("PLAINTEXT", 2)],
        broker=BrokerSnapshot(
            traffic=[("orders", 10, 1500, 3000)],
            partitions=2,
            leaders=1,
            under_replicated=1,
            offline=0,
            isr_shrinks=1,
            isr_expands=0,
            delayed_produces=1,
            delayed_produce_partitions=2,
            delayed_fetches=3,
            fetch_watches=4,
            logs=[("orders", 0, 1500, 10, 0)],
            groups=[(CommittedOffset("billing", "orders", 0, 7), 3)],
        ),
        quorum=QuorumSnapshot(
            leader=1,
            epoch=4,
            high_watermark=99,
            log_end_offset=99,
            applied_offset=98,
            active_controller=True,
            cluster=None,
            replica_lags=[(1, "voter", 0), (2, "voter", 5)],
        ),
    )
    body, content_type = render(snapshot, accept="")
    assert content_type.startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Produce"),))] == 3
    histogram = "kafka_network_requestmetrics_totaltimems"
    assert samples[(f"{histogram}_bucket", (("le", "0.5"), ("request", "Produce")))] == 2
    assert samples[(f"{histogram}_bucket", (("le", "5.0"), ("request", "Produce")))] == 2
    assert samples[(f"{histogram}_bucket", (("le", "10.0"), ("request", "Produce")))] == 3
    assert samples[(f"{histogram}_bucket", (("le", "+Inf"), ("request", "Produce")))] == 3
    assert samples[(f"{histogram}_count", (("request", "Produce"),))] == 3
    assert samples[(f"{histogram}_sum", (("request", "Produce"),))] == pytest.approx(6.1)
    topic = (("topic", "orders"),)
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == 10
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", topic)] == 3000
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert samples[("kafka_server_replicamanager_isrshrinks_total", ())] == 1
    operation = (("delayedOperation", "Fetch"),)
    assert samples[("kafka_server_delayedoperationpurgatory_numdelayedoperations", operation)] == 3
    assert samples[("kafka_log_log_size", (("partition", "0"), ("topic", "orders")))] == 1500
    group = (("consumergroup", "billing"), ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_consumergroup_lag", group)] == 3
    assert samples[("kafka_consumergroup_current_offset", group)] == 7
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert samples[("moldau_quorum_replica_lag", (("kind", "voter"), ("replica", "2")))] == 5
    assert ("kafka_controller_kafkacontroller_fencedbrokercount", ()) not in samples  # a broker
    assert samples[("process_cpu_seconds_total", ())] > 0


def test_openmetrics_is_served_to_a_scraper_that_asks_for_it() -> None:
    snapshot = NodeSnapshot(
        requests=[],
        request_buckets=[],
        request_seconds=[],
        connections=[],
        broker=None,
        quorum=None,
    )
    body, content_type = render(snapshot, accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
