"""A Moldau cluster of several processes on loopback: the metadata quorum (KRaft), brokers that
register and are fenced, metadata changes forwarded to the active controller, and the failover
of the active controller under a loop of topic creations."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.client.config import ClientConfig
from moldau.client.quorum import QuorumInfo, describe_controllers
from moldau.metadata.records import RegisterControllerRecord
from moldau.metadata.serde import deserialize_record
from moldau.raft.file_log import FileReplicatedLog

from .cluster import BROKER, COMBINED, CONTROLLER, Cluster, ClusterNode, build_cluster, wait_for
from .wire import Connection

SESSION_MS = "3000"
FAST = {
    "broker.session.timeout.ms": SESSION_MS,
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "3",
}


def _quorum(node_bootstrap: str) -> object:
    """DescribeQuorum v2 through a broker (forwarded to the active controller if need be)."""
    host, port = node_bootstrap.split(":")
    with Connection(host, int(port), timeout=10) as connection:
        response = connection.request(
            55,
            2,
            {
                "topics": [
                    {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}
                ]
            },
        )
    [topic] = response.topics
    [partition] = topic.partitions
    assert partition.error_code == 0, partition
    return partition


def _live_brokers(bootstrap: str) -> set[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
    return set(metadata.brokers)


def _leader(cluster: Cluster) -> int:
    any_broker = cluster.brokers()[0].bootstrap
    return int(_quorum(any_broker).leader_id)


@pytest.fixture
def three_nodes(start_server, tmp_path: Path) -> Cluster:
    return build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=FAST)


def test_three_combined_nodes_form_one_quorum_and_serve_clients(three_nodes: Cluster) -> None:
    cluster = three_nodes
    quorum = _quorum(cluster.nodes[1].bootstrap)
    assert sorted(v.replica_id for v in quorum.current_voters) == [1, 2, 3]
    assert quorum.leader_id in (1, 2, 3) and quorum.leader_epoch >= 1
    assert wait_for(
        lambda: _live_brokers(cluster.bootstrap) == {1, 2, 3},
        timeout_s=10,
        what="three live brokers",
    )
    # A topic created through a broker that is not the active controller (forwarded).
    follower = next(n for n in cluster.brokers() if n.node_id != quorum.leader_id)
    admin = AdminClient({"bootstrap.servers": follower.bootstrap})
    admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=1)])[
        "spread"
    ].result(15)

    def leaders() -> dict[int, int] | None:
        # (a broker learns of the topic when it has replayed the controller's commit)
        topic = admin.list_topics(timeout=10).topics.get("spread")
        return {p.id: p.leader for p in topic.partitions.values()} if topic else None

    placed = wait_for(leaders, timeout_s=10, what="the topic in the broker's metadata")
    assert set(placed.values()) == {1, 2, 3}, placed
    # Clients produce to and consume from every broker through any bootstrap server.
    producer = Producer({"bootstrap.servers": follower.bootstrap, "enable.idempotence": True})
    for index in range(300):
        producer.produce("spread", key=b"%d" % index, value=b"value-%d" % index)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "cluster-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["spread"])
    values = set()
    deadline = time.monotonic() + 30
    while len(values) < 300 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.add(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert values == {b"value-%d" % i for i in range(300)}


def test_the_active_controller_dies_in_a_topic_creation_loop(three_nodes: Cluster) -> None:
    cluster = three_nodes
    leader = _leader(cluster)
    survivor = next(n for n in cluster.brokers() if n.node_id != leader)
    requested = [f"loop-{i}" for i in range(40)]
    outcomes: dict[str, str] = {}
    errors: list[str] = []

    def creations() -> None:
        admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
        for name in requested:
            deadline = time.monotonic() + 30
            while True:
                try:
                    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=5)[name].result(
                        10
                    )
                    outcomes[name] = "created"
                    break
                except (KafkaException, TimeoutError) as error:
                    code = error.args[0].name() if error.args else "TIMED_OUT"
                    if code == "TOPIC_ALREADY_EXISTS":  # a retry of a creation that committed
                        outcomes[name] = "existed"
                        break
                    errors.append(f"{name}: {code}")
                    if time.monotonic() > deadline:
                        outcomes[name] = f"failed: {code}"
                        break
                    time.sleep(0.1)

    worker = threading.Thread(target=creations)
    worker.start()
    wait_for(lambda: len(outcomes) >= 10, timeout_s=30, what="ten topic creations")
    killed_at = time.monotonic()
    cluster.kill(leader)

    def another_leader() -> int | None:
        current = int(_quorum(survivor.bootstrap).leader_id)
        return current if current not in (leader, -1) else None

    new_leader = wait_for(another_leader, timeout_s=20, what="a new active controller")
    elected_s = time.monotonic() - killed_at
    worker.join(120)
    assert not worker.is_alive()
    assert all(v in ("created", "existed") for v in outcomes.values()), (outcomes, errors)
    topics = AdminClient({"bootstrap.servers": survivor.bootstrap}).list_topics(timeout=10).topics
    assert {n for n in topics if n.startswith("loop-")} == set(requested)
    assert all(len(topics[name].partitions) == 1 for name in requested)  # created once each
    assert new_leader != leader and elected_s < 10, elected_s
    print(f"new active controller {new_leader} {elected_s:.2f} s after SIGKILL of {leader}")
    # The killed broker is fenced: it leaves clients' metadata, and comes back when restarted.
    wait_for(
        lambda: leader not in _live_brokers(survivor.bootstrap),
        timeout_s=15,
        what=f"broker {leader} fenced",
    )
    cluster.launch([leader])
    wait_for(
        lambda: leader in _live_brokers(survivor.bootstrap),
        timeout_s=20,
        what=f"broker {leader} back",
    )


def _describe_cluster(host: str, port: int, endpoint_type: int) -> object:
    with Connection(host, port, timeout=10) as connection:
        return connection.request(
            60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}
        )


def _registered_controllers(port: int) -> tuple[int, dict[int, tuple[str, int]]]:
    """DescribeCluster v1 with endpoint type 2 on a controller listener (KIP-919): the active
    controller's id and the registered controllers' endpoints."""
    response = _describe_cluster("127.0.0.1", port, 2)
    assert response.error_code == 0 and response.endpoint_type == 2, response
    return response.controller_id, {b.broker_id: (b.host, b.port) for b in response.brokers}


def _registration_line(output: str, node_id: int) -> str | None:
    """The incarnation id a controller process logged once its registration was committed."""
    found = re.findall(rf"controller {node_id} is registered \(incarnation ([0-9a-f-]+)\)", output)
    return found[-1] if found else None


def test_controllers_and_brokers_on_separate_nodes(start_server, tmp_path: Path) -> None:
    cluster = build_cluster(
        start_server, tmp_path, roles=[CONTROLLER, CONTROLLER, CONTROLLER, BROKER], extra=FAST
    )
    broker = cluster.nodes[4]
    quorum = _quorum(broker.bootstrap)
    assert sorted(v.replica_id for v in quorum.current_voters) == [1, 2, 3]
    assert [o.replica_id for o in quorum.observers] == [4]
    assert _live_brokers(broker.bootstrap) == {4}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("on-the-broker", 2, 1)])["on-the-broker"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("on-the-broker", value=b"hello")
    assert producer.flush(15) == 0

    # Every controller registered its listener (KIP-919); any controller answers with all.
    controllers = {n.node_id: n for n in cluster.nodes.values() if n.controller_port is not None}
    expected = {i: ("127.0.0.1", n.controller_port) for i, n in controllers.items()}
    for node in controllers.values():
        assert node.controller_port is not None
        leader = wait_for(
            lambda port=node.controller_port: (
                (answer := _registered_controllers(port))[1] == expected and answer[0]
            ),
            timeout_s=20,
            what=f"the three controllers registered, as node {node.node_id} sees them",
        )
        assert leader in controllers  # the quorum's leader, registered
    # A broker asked for controllers, and a controller asked for brokers, refuse (Kafka's codes).
    assert _describe_cluster("127.0.0.1", broker.client_port, 2).error_code == 114
    assert _describe_cluster("127.0.0.1", controllers[1].controller_port, 1).error_code == 114
    # A controller that is not the active one sends the registering controller elsewhere.
    leader = _registered_controllers(controllers[1].controller_port)[0]
    follower = next(n for i, n in controllers.items() if i != leader)
    with Connection("127.0.0.1", follower.controller_port, timeout=10) as connection:
        refused = connection.request(
            70,
            0,
            {
                "controller_id": 99,
                "incarnation_id": uuid.uuid4(),
                "zk_migration_ready": False,
                "listeners": [],
                "features": [],
            },
        )
    assert refused.error_code == 41, refused  # NOT_CONTROLLER

    # A restarted controller registers its new incarnation.
    restarted = controllers[2]
    assert restarted.server is not None
    before = _registration_line(restarted.server.output_tail(2000), 2)
    assert before is not None, restarted.server.output_tail()
    cluster.stop(2)
    cluster.launch([2])
    after = wait_for(
        lambda: _registration_line(restarted.server.output_tail(2000), 2),
        timeout_s=20,
        what="the restarted controller registered",
    )
    assert after != before
    assert _registered_controllers(restarted.controller_port)[1] == expected
    # The broker's copy of the metadata log holds both registrations of node 2, in order.
    cluster.stop(4)
    metadata_log = FileReplicatedLog(str(broker.data_dir / "__cluster_metadata-0"))
    try:
        registrations = [
            record
            for entry in metadata_log.read()
            if not entry.is_control
            for record in map(deserialize_record, entry.records)
            if isinstance(record, RegisterControllerRecord)
        ]
    finally:
        metadata_log.close()
    assert {r.controller_id for r in registrations} == {1, 2, 3}
    incarnations = [str(r.incarnation_id) for r in registrations if r.controller_id == 2]
    assert incarnations == [before, after], incarnations

    _upgrade_to_dynamic_voters(cluster, controllers)


def _moldau(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moldau", *arguments], capture_output=True, text=True, timeout=120
    )


def _directory_id(node: ClusterNode) -> str:
    text = (node.data_dir / "meta.properties").read_text()
    [line] = [x for x in text.splitlines() if x.startswith("directory.id=")]
    return line.split("=", 1)[1]


def _kraft_version_line(bootstrap_controller: str) -> str:
    described = _moldau("feature", "describe", "--bootstrap-controller", bootstrap_controller)
    assert described.returncode == 0, described.stderr
    [line] = [x for x in described.stdout.splitlines() if x.startswith("Feature: kraft.version")]
    return line


def _controller_quorum(bootstrap_controller: str) -> QuorumInfo:
    async def ask() -> QuorumInfo:
        return (await describe_controllers(ClientConfig({}), bootstrap_controller)).quorum

    return asyncio.run(ask())


def _voters(bootstrap_controller: str) -> dict[int, str | None]:
    return {v.replica_id: v.directory_id for v in _controller_quorum(bootstrap_controller).voters}


def _retried(*arguments: str, what: str) -> None:
    """Run a `moldau` command until it succeeds (the leader refuses, exit 1, until it can)."""

    def attempt() -> bool:
        result = _moldau(*arguments)
        if result.returncode != 0:
            raise AssertionError(result.stdout + result.stderr)  # (kept as the last error)
        return True

    wait_for(attempt, timeout_s=30, what=what)


def _upgrade_to_dynamic_voters(cluster: Cluster, controllers: dict[int, ClusterNode]) -> None:
    """The static quorum (controller.quorum.voters) upgraded to kraft.version 1 with the CLI;
    then a voter removed and added back, and a restart that keeps the dynamic voter set."""
    bootstrap = ",".join(f"127.0.0.1:{n.controller_port}" for n in controllers.values())
    assert "FinalizedVersionLevel: 0" in _kraft_version_line(bootstrap)
    upgrade = ("feature", "upgrade", "--bootstrap-controller", bootstrap)
    _retried(*upgrade, "--feature", "kraft.version=1", "--dry-run", what="a dry run that passes")
    assert "FinalizedVersionLevel: 0" in _kraft_version_line(bootstrap)
    _retried(
        "feature",
        "upgrade",
        "--bootstrap-controller",
        bootstrap,
        "--feature",
        "kraft.version=1",
        what="the kraft.version upgrade taken (every voter's directory id known)",
    )
    directory_ids = {i: _directory_id(n) for i, n in controllers.items()}
    assert _voters(bootstrap) == directory_ids
    assert "FinalizedVersionLevel: 1" in _kraft_version_line(bootstrap)
    downgrade = _moldau(
        "feature", "downgrade", "--bootstrap-controller", bootstrap, "--feature", "kraft.version=0"
    )
    assert downgrade.returncode == 1 and "downgrade" in downgrade.stderr, downgrade.stderr

    removed = controllers[3]
    _retried(
        "cluster",
        "remove-controller",
        "--bootstrap-controller",
        bootstrap,
        "--controller-id",
        "3",
        "--controller-directory-id",
        directory_ids[3],
        what="controller 3 removed",
    )
    wait_for(
        lambda: sorted(_voters(bootstrap)) == [1, 2],
        timeout_s=20,
        what="voters 1 and 2 only",
    )
    # Restarted with controller.quorum.voters still naming it, the removed controller follows
    # the log's voter set: an observer, whose own view is kraft.version 1.
    cluster.stop(3)
    cluster.launch([3])
    own = f"127.0.0.1:{removed.controller_port}"
    wait_for(
        lambda: 3 in {o.replica_id for o in _controller_quorum(bootstrap).observers},
        timeout_s=20,
        what="the restarted controller 3 fetching as an observer",
    )
    assert sorted(_voters(bootstrap)) == [1, 2]
    assert "FinalizedVersionLevel: 1" in _kraft_version_line(own)
    options = []
    for key, value in removed.overrides.items():
        options += ["--override", f"{key}={value}"]
    _retried(
        "cluster",
        "add-controller",
        "--bootstrap-controller",
        bootstrap,
        *options,
        what="controller 3 added back once caught up",
    )
    wait_for(
        lambda: _voters(bootstrap) == directory_ids,
        timeout_s=20,
        what="voters 1, 2 and 3 with their directory ids again",
    )


def test_a_controller_that_is_not_a_voter_stops_with_one_line(start_server, tmp_path) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED], launch=False)
    node = cluster.nodes[1]
    node.overrides["controller.quorum.voters"] = "7@127.0.0.1:1,8@127.0.0.1:2,9@127.0.0.1:3"
    arguments = [sys.executable, "-m", "moldau", "server"]
    for key, value in node.overrides.items():
        arguments += ["--override", f"{key}={value}"]
    result = subprocess.run(arguments, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not one of controller.quorum.voters" in errors[0], result.stderr


def test_a_stopping_active_controller_hands_over_before_the_fetch_timeout(
    start_server, tmp_path: Path
) -> None:
    """SIGTERM of the active controller: its EndQuorumEpoch reaches the other voters before the
    process goes, and they elect a leader at once. Without it they would wait for their fetch
    timeout, set long here so that the difference shows."""
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, "controller.quorum.fetch.timeout.ms": "15000"},
    )
    leader = _leader(cluster)
    survivor = next(node for node in cluster.brokers() if node.node_id != leader)
    began = time.monotonic()
    cluster.stop(leader)
    new_leader = wait_for(
        lambda: (lid := int(_quorum(survivor.bootstrap).leader_id)) not in (leader, -1) and lid,
        timeout_s=10,
        what="a new quorum leader before the 15 s fetch timeout",
    )
    assert new_leader != leader
    assert time.monotonic() - began < 10


@pytest.mark.parametrize(
    "roles", [[CONTROLLER, BROKER], [COMBINED, BROKER]], ids=["dedicated", "combined"]
)
def test_a_quorum_of_one_static_voter_serves_other_brokers(
    start_server, tmp_path: Path, roles: list[str]
) -> None:
    """`controller.quorum.voters` naming one node is a quorum that brokers join as observers
    (it used to be run as a node alone, which answered no observer's fetch)."""
    cluster = build_cluster(start_server, tmp_path, roles=roles, extra=FAST)
    broker = cluster.nodes[2]
    quorum = _quorum(broker.bootstrap)
    assert [v.replica_id for v in quorum.current_voters] == [1]
    assert 2 in [o.replica_id for o in quorum.observers]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("one-voter", 1, 1)])["one-voter"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("one-voter", value=b"hello")
    assert producer.flush(15) == 0
    cluster.stop_all()


def test_a_broker_waiting_for_its_quorum_stops_on_sigterm(start_server, tmp_path: Path) -> None:
    """SIGTERM while the node starts (here: its only controller never comes) stops it cleanly."""
    cluster = build_cluster(start_server, tmp_path, roles=[CONTROLLER, BROKER], launch=False)
    broker = cluster.nodes[2]
    assert cluster.factory is not None
    broker.server = cluster.factory(launch_only=True, **{
        key.replace(".", "_"): value for key, value in broker.overrides.items()
    })  # fmt: skip
    wait_for(
        lambda: "joining the metadata quorum" in broker.server.output_tail(50),
        timeout_s=30,
        what="the broker waiting for its quorum",
    )
    started = time.monotonic()
    assert broker.server.stop() == 0
    assert time.monotonic() - started < 10
    assert "shutting down before the node was ready" in broker.server.output_tail(50)
