"""A node's metrics and health endpoints (`http.listeners`) against real servers: values on
`/metrics` (parsed with prometheus-client's own parser) follow what confluent-kafka produces,
consumes and commits; `/ready` answers 503 until a cluster node serves, then 200; a follower
killed shows as an under-replicated partition on its leader; hostile HTTP gets a 4xx or a
closed connection while the node goes on serving; a bad `http.listeners` stops the node."""

from __future__ import annotations

import http.client
import re
import select
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from . import rdkafka
from .cluster import COMBINED, build_cluster, create_replicated_topic, wait_for
from .conftest import MoldauServer, ServerFactory

HTTP_LINE = re.compile(r"Moldau HTTP: (?P<url>https?://\S+)")
ANY_PORT = {"http_listeners": "http://127.0.0.1:0"}
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "2000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}

MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"


def http_url(server: MoldauServer, timeout_s: float = 30) -> str:
    """The URL of the node's HTTP endpoints, from the line it prints once they listen."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = HTTP_LINE.search(server.output_tail(400))
        if found:
            return found.group("url")
        time.sleep(0.05)
    raise AssertionError(f"no HTTP line in the output:\n{server.output_tail()}")


def get(url: str, path: str, *, method: str = "GET") -> tuple[int, str]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, path)
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


class Scrape:
    """One scrape of `/metrics`, parsed by prometheus-client: `scrape(name, **labels)` is a
    sample's value (0 when the node has no such sample)."""

    def __init__(self, url: str) -> None:
        status, text = get(url, "/metrics")
        assert status == 200
        self.samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels: str) -> bool:
        return (name, frozenset(labels.items())) in self.samples


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def node(module_server_factory: ServerFactory) -> Iterator[tuple[MoldauServer, str]]:
    server = module_server_factory(**ANY_PORT)
    yield server, http_url(server)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for item in values:
        producer.produce(topic, value=item)
    assert producer.flush(30) == 0


def test_records_and_bytes_in_and_out_follow_what_clients_produce_and_consume(node) -> None:
    server, url = node
    topic = unique("traffic")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    values = [b"value-%04d" % index for index in range(500)]
    before = Scrape(url)
    produce(server.bootstrap_servers, topic, values)

    produced = Scrape(url)
    assert produced(MESSAGES_IN, topic=topic) == 500
    bytes_in = produced(BYTES_IN, topic=topic)
    assert bytes_in > sum(len(item) for item in values)  # the values, in batches with headers
    assert produced("kafka_log_log_size", topic=topic, partition="0") == bytes_in
    assert produced("kafka_log_log_logendoffset", topic=topic, partition="0") == 500
    produces = produced(REQUESTS, request="Produce")
    assert produces > before(REQUESTS, request="Produce")
    # every Produce taken has been answered, its time in a bucket
    assert produced(f"{TOTAL_TIME}_count", request="Produce") == produces
    assert produced(f"{TOTAL_TIME}_bucket", request="Produce", le="+Inf") == produces
    assert produced(f"{TOTAL_TIME}_sum", request="Produce") > 0

    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        received = 0
        deadline = time.monotonic() + 30
        while received < 500 and time.monotonic() < deadline:
            received += sum(1 for m in consumer.consume(500, timeout=1) if m.error() is None)
        assert received == 500
        consumed = Scrape(url)
        connections = "kafka_server_socket_server_metrics_connection_count"
        assert consumed(connections, listener="PLAINTEXT") >= 1  # the consumer's, at least
    finally:
        consumer.close()
    assert consumed(BYTES_OUT, topic=topic) >= bytes_in
    assert consumed(REQUESTS, request="Fetch") > produced(REQUESTS, request="Fetch")
    partitions = consumed("kafka_server_replicamanager_partitioncount")
    assert partitions >= 1
    assert consumed("kafka_server_replicamanager_leadercount") == partitions  # (one node)
    assert consumed(UNDER_REPLICATED) == 0
    assert consumed("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert consumed("kafka_controller_kafkacontroller_globaltopiccount") >= 1


def test_a_groups_lag_falls_to_zero_once_it_commits_the_end(node) -> None:
    server, url = node
    topic, group = unique("lagging"), unique("group")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    produce(server.bootstrap_servers, topic, [b"x"] * 40)
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    labels = {"consumergroup": group, "topic": topic, "partition": "0"}
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 15)], asynchronous=False)
        halfway = Scrape(url)
        assert halfway("kafka_consumergroup_current_offset", **labels) == 15
        assert halfway("kafka_consumergroup_lag", **labels) == 25
        consumer.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
        caught_up = Scrape(url)
        assert caught_up.has("kafka_consumergroup_lag", **labels)
        assert caught_up("kafka_consumergroup_lag", **labels) == 0
    finally:
        consumer.close()


def test_health_answers_and_other_paths_and_methods_are_refused(node) -> None:
    _server, url = node
    assert get(url, "/health") == (200, "ok\n")
    assert get(url, "/ready") == (200, "ready\n")
    assert get(url, "/metrics", method="HEAD")[0] == 200
    assert get(url, "/metrics", method="POST")[0] == 405
    assert get(url, "/ready", method="DELETE")[0] == 405
    assert get(url, "/")[0] == 404
    assert get(url, "/metrics/../admin")[0] == 404


def raw_exchange(url: str, data: bytes, *, timeout_s: float = 10) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def trickle(url: str, headers: bytes) -> bytes:
    """Send a request head 1 KiB at a time until the node answers; its answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for start in range(0, len(head), 1024):
            sock.sendall(head[start : start + 1024])
            readable, _, _ = select.select([sock], [], [], 0.005)
            if readable:
                return sock.recv(65536)
        return sock.recv(65536)


def test_hostile_requests_get_a_4xx_and_the_node_goes_on_serving(node) -> None:
    server, url = node
    assert raw_exchange(url, b"NOT A REQUEST LINE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw_exchange(url, b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n").startswith(
        b"HTTP/1.1 400"
    )
    assert raw_exchange(url, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" * 8).startswith(
        b"HTTP/1.1 400"
    )  # (TLS on a plain listener)
    # A head growing past 16 KiB is refused (h11 bounds what it holds of an incomplete head).
    assert trickle(url, b"X-Big: " + b"a" * 64 * 1024 + b"\r\n").startswith(b"HTTP/1.1 400")
    assert trickle(url, b"X-H: v\r\n" * 5000).startswith(b"HTTP/1.1 400")

    # Slowloris: a head trickling in is cut off at its deadline, while others are served.
    host, port = url.removeprefix("http://").rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - started < 20:
            assert get(url, "/health")[0] == 200
            try:
                slow.sendall(b"X-Slow: 1\r\n")
                slow.settimeout(1)
                if slow.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:  # reset: closed too
                closed = True
                break
    assert closed, "a head that never ends kept its connection"
    assert time.monotonic() - started < 10

    topic = unique("after-hostile")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    produce(server.bootstrap_servers, topic, [b"still serving"])
    assert Scrape(url)(MESSAGES_IN, topic=topic) == 1


def test_a_malformed_http_listener_stops_the_node_with_one_line(
    start_server: ServerFactory,
) -> None:
    server = start_server(launch_only=True, http_listeners="http://127.0.0.1")
    code = server.wait_exited(30)
    assert code != 0
    errors = [line for line in server.output_tail().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "http.listeners" in errors[0], server.output_tail()
    assert "no valid port" in errors[0]


def test_https_without_a_key_stops_the_node_with_one_line(start_server: ServerFactory) -> None:
    server = start_server(launch_only=True, http_listeners="https://127.0.0.1:0")
    assert server.wait_exited(30) != 0
    errors = [line for line in server.output_tail().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "https listener but the node has no key" in errors[0]


def test_a_configured_port_that_is_taken_stops_the_node_with_one_line(
    start_server: ServerFactory,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = start_server(launch_only=True, http_listeners=f"http://127.0.0.1:{port}")
        assert server.wait_exited(30) != 0
    errors = [line for line in server.output_tail().splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1
        and f"http.listeners: cannot listen on http://127.0.0.1:{port}" in errors[0]
    )


def test_without_configuration_a_single_node_serves_http_on_9644(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    probe = socket.socket()
    try:
        probe.bind(("127.0.0.1", 9644))
    except OSError:
        pytest.skip("port 9644 is in use by another process on this machine")
    finally:
        probe.close()
    server = start_server(
        isolated=False,
        arguments=[
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            "--override",
            "schema.registry.listeners=",
        ],
    )
    assert http_url(server) == "http://127.0.0.1:9644"
    assert get("http://127.0.0.1:9644", "/ready") == (200, "ready\n")


def test_ready_is_503_until_the_cluster_serves_and_a_dead_follower_is_under_replicated(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, "http.listeners": "http://127.0.0.1:0"},
        launch=False,
    )
    try:
        # Alone, node 1 cannot join a quorum of three: alive, not ready, saying why.
        cluster.launch([1], wait=False)
        first = cluster.nodes[1].server
        assert first is not None
        first_url = http_url(first)
        assert get(first_url, "/health") == (200, "ok\n")
        wait_for(
            lambda: get(first_url, "/ready") == (503, "joining the metadata quorum\n"),
            timeout_s=30,
            what="node 1 waiting for its quorum",
        )
        time.sleep(1)
        assert get(first_url, "/ready") == (503, "joining the metadata quorum\n")
        cluster.launch([2, 3])
        first.wait_ready()
        urls = {node_id: http_url(n.server) for node_id, n in cluster.nodes.items()}  # type: ignore[arg-type]
        for node_id, url in urls.items():
            wait_for(
                lambda u=url: get(u, "/ready") == (200, "ready\n"),
                timeout_s=30,
                what=f"node {node_id} ready",
            )

        scrapes = {node_id: Scrape(url) for node_id, url in urls.items()}
        active = "kafka_controller_kafkacontroller_activecontrollercount"
        [controller] = [node_id for node_id, scrape in scrapes.items() if scrape(active) == 1]
        for scrape in scrapes.values():
            assert scrape("kafka_server_raft_metrics_current_leader") == controller
            assert scrape("kafka_server_raft_metrics_current_epoch") >= 1
            assert scrape("kafka_controller_kafkacontroller_fencedbrokercount") == 0
            assert scrape("kafka_controller_kafkacontroller_activebrokercount") == 3
        for voter in ("1", "2", "3"):  # (the leader's view of each voter)
            assert scrapes[controller].has("moldau_quorum_replica_lag", replica=voter, kind="voter")

        leader = create_replicated_topic({"bootstrap.servers": cluster.bootstrap}, "watched")
        produce(cluster.bootstrap, "watched", [b"before"] * 10)
        assert Scrape(urls[leader])(MESSAGES_IN, topic="watched") == 10
        assert Scrape(urls[leader])(UNDER_REPLICATED) == 0
        cluster.kill(next(node_id for node_id in (1, 2, 3) if node_id != leader))
        wait_for(
            lambda: Scrape(urls[leader])(UNDER_REPLICATED) > 0,
            timeout_s=30,
            what="the partition under-replicated on its leader",
        )
        assert Scrape(urls[leader])("kafka_server_replicamanager_isrshrinks_total") >= 1
        assert get(urls[leader], "/ready") == (200, "ready\n")
    finally:
        cluster.stop_all()
