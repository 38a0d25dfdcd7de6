"""Dynamic voters (KIP-853) with real processes: one controller formatted `--standalone`, two
more formatted `--no-initial-controllers` that find the quorum through
`controller.quorum.bootstrap.servers`, are added as voters with the admin API (Moldau's client,
and `moldau cluster add-controller`), keep the quorum going after a SIGKILL of the first, and a
voter is removed; DescribeQuorum (Moldau's client and kafka-python's) shows each change."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from moldau.client.config import ClientConfig
from moldau.client.errors import KafkaException
from moldau.client.quorum import (
    ControllerListener,
    QuorumInfo,
    add_controller,
    describe_controllers,
    remove_controller,
)

from .cluster import COMBINED, Cluster, ClusterNode, free_port, wait_for

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def _moldau(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moldau", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _overrides(node: ClusterNode) -> list[str]:
    options = []
    for key, value in node.overrides.items():
        options += ["--override", f"{key}={value}"]
    return options


def _directory_id(node: ClusterNode) -> str:
    text = (node.data_dir / "meta.properties").read_text()
    [line] = [x for x in text.splitlines() if x.startswith("directory.id=")]
    return line.split("=", 1)[1]


def _quorum(bootstrap_controllers: str) -> QuorumInfo:
    async def ask() -> QuorumInfo:
        return (await describe_controllers(ClientConfig({}), bootstrap_controllers)).quorum

    return asyncio.run(ask())


def _add(node: ClusterNode, bootstrap_controllers: str) -> bool:
    """Moldau's admin client: AddRaftVoter for `node` (False while it is not caught up)."""

    async def add() -> None:
        assert node.controller_port is not None
        await add_controller(
            ClientConfig({}),
            bootstrap_controllers,
            voter_id=node.node_id,
            directory_id=_directory_id(node),
            listeners=[ControllerListener("CONTROLLER", "127.0.0.1", node.controller_port)],
        )

    try:
        asyncio.run(add())
    except KafkaException as error:
        if error.code.name == "REQUEST_TIMED_OUT":  # not caught up yet, or a change pending
            return False
        raise
    return True


@pytest.fixture
def growing_cluster(start_server, tmp_path: Path) -> Cluster:
    """Node 1 formatted --standalone and started; nodes 2 and 3 formatted
    --no-initial-controllers (not started)."""
    cluster_id = _moldau("storage", "random-uuid").stdout.strip()
    cluster = Cluster(cluster_id=cluster_id, factory=start_server)
    controller_ports = {i: free_port() for i in (1, 2, 3)}
    for node_id in (1, 2, 3):
        node = ClusterNode(
            node_id=node_id,
            roles=COMBINED,
            client_port=free_port(),
            controller_port=controller_ports[node_id],
            data_dir=tmp_path / f"node-{node_id}",
            overrides={},
        )
        node.overrides = {
            "node.id": str(node_id),
            "process.roles": COMBINED,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.client_port}"
            f",CONTROLLER://127.0.0.1:{node.controller_port}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_ports[1]}",
            "log.dirs": str(node.data_dir),
            **FAST,
        }
        how = "--standalone" if node_id == 1 else "--no-initial-controllers"
        formatted = _moldau("storage", "format", "-t", cluster_id, how, *_overrides(node))
        assert formatted.returncode == 0, formatted.stderr
        cluster.nodes[node_id] = node
    cluster.launch([1])
    return cluster


def test_controllers_join_a_standalone_quorum_survive_its_first_and_one_is_removed(
    growing_cluster: Cluster,
) -> None:
    cluster = growing_cluster
    first, second, third = (cluster.nodes[i] for i in (1, 2, 3))
    controllers = f"127.0.0.1:{first.controller_port}"
    quorum = _quorum(controllers)
    assert [v.replica_id for v in quorum.voters] == [1]
    assert quorum.voters[0].directory_id == _directory_id(first)
    cluster.launch([2, 3])
    # Both follow the log as observers, found through the bootstrap server.
    wait_for(
        lambda: {o.replica_id for o in _quorum(controllers).observers} >= {2, 3},
        timeout_s=20,
        what="nodes 2 and 3 observing",
    )
    # Node 2 added with Moldau's admin client, node 3 with `moldau cluster add-controller`.
    wait_for(lambda: _add(second, controllers), timeout_s=30, what="node 2 added")

    def add_with_cli() -> bool:
        result = _moldau(
            "cluster", "add-controller", "--bootstrap-controller", controllers, *_overrides(third)
        )
        if result.returncode != 0:
            assert "REQUEST_TIMED_OUT" in result.stderr or "caught up" in result.stderr, result
            return False
        return True

    wait_for(add_with_cli, timeout_s=30, what="node 3 added")
    quorum = _quorum(controllers)
    assert [v.replica_id for v in quorum.voters] == [1, 2, 3]
    assert {v.replica_id: v.directory_id for v in quorum.voters} == {
        n.node_id: _directory_id(n) for n in (first, second, third)
    }
    assert quorum.endpoints[3] == f"127.0.0.1:{third.controller_port}"
    # kafka-python sees the same voters, with their directory ids and endpoints (v2).
    python_admin = KafkaAdminClient(bootstrap_servers=second.bootstrap)
    try:
        described: Any = python_admin.describe_metadata_quorum()
    finally:
        python_admin.close()
    [partition] = described["topics"][0]["partitions"]
    assert sorted(v["replica_id"] for v in partition["current_voters"]) == [1, 2, 3]
    assert {n["node_id"] for n in described["nodes"]} == {1, 2, 3}

    # The first controller dies; the two it added keep the quorum going.
    cluster.kill(1)
    survivors = f"127.0.0.1:{second.controller_port},127.0.0.1:{third.controller_port}"

    def new_leader() -> int | None:
        leader = _quorum(survivors).leader_id
        return leader if leader in (2, 3) else None

    wait_for(new_leader, timeout_s=30, what="a leader among nodes 2 and 3")
    admin = AdminClient({"bootstrap.servers": f"{second.bootstrap},{third.bootstrap}"})

    def create_topic() -> bool:
        admin.create_topics([NewTopic("after-the-first", 1, 1)])["after-the-first"].result(15)
        return True

    wait_for(create_topic, timeout_s=45, what="a topic created without node 1")
    wait_for(
        lambda: "after-the-first" in admin.list_topics(timeout=10).topics,
        timeout_s=15,
        what="the new topic in the brokers' metadata",
    )

    # The dead first controller is removed: two voters remain.
    async def remove() -> None:
        await remove_controller(
            ClientConfig({}), survivors, voter_id=1, directory_id=_directory_id(first)
        )

    asyncio.run(remove())
    quorum = _quorum(survivors)
    assert [v.replica_id for v in quorum.voters] == [2, 3]
    admin.create_topics([NewTopic("with-two-voters", 1, 1)])["with-two-voters"].result(15)

    # The leader removes itself: it steps down once that commits, and the other leads alone.
    leader = quorum.leader_id
    other = cluster.nodes[5 - leader]

    async def remove_leader() -> None:
        await remove_controller(
            ClientConfig({}),
            survivors,
            voter_id=leader,
            directory_id=_directory_id(cluster.nodes[leader]),
        )

    asyncio.run(remove_leader())
    wait_for(
        lambda: _quorum(survivors).leader_id == other.node_id,
        timeout_s=30,
        what=f"node {other.node_id} leading after node {leader} removed itself",
    )
    quorum = _quorum(survivors)
    assert [v.replica_id for v in quorum.voters] == [other.node_id]
    wait_for(
        lambda: leader in {o.replica_id for o in _quorum(survivors).observers},
        timeout_s=15,
        what=f"node {leader} following on as an observer",
    )

    def create_last() -> bool:
        admin.create_topics([NewTopic("with-one-voter", 1, 1)])["with-one-voter"].result(15)
        return True

    wait_for(create_last, timeout_s=30, what="a topic created with one voter left")


def test_initial_controllers_form_a_quorum_of_three(start_server, tmp_path: Path) -> None:
    cluster_id = _moldau("storage", "random-uuid").stdout.strip()
    cluster = Cluster(cluster_id=cluster_id, factory=start_server)
    directory_ids = [_moldau("storage", "random-uuid").stdout.strip() for _ in range(3)]
    ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
    initial = ",".join(f"{i}@127.0.0.1:{ports[i][1]}:{directory_ids[i - 1]}" for i in (1, 2, 3))
    for node_id in (1, 2, 3):
        client_port, controller_port = ports[node_id]
        node = ClusterNode(
            node_id=node_id,
            roles=COMBINED,
            client_port=client_port,
            controller_port=controller_port,
            data_dir=tmp_path / f"node-{node_id}",
            overrides={
                "node.id": str(node_id),
                "process.roles": COMBINED,
                "listeners": f"PLAINTEXT://127.0.0.1:{client_port}"
                f",CONTROLLER://127.0.0.1:{controller_port}",
                "controller.quorum.bootstrap.servers": ",".join(
                    f"127.0.0.1:{ports[i][1]}" for i in (1, 2, 3)
                ),
                "log.dirs": str(tmp_path / f"node-{node_id}"),
                **FAST,
            },
        )
        formatted = _moldau(
            "storage",
            "format",
            "-t",
            cluster_id,
            "--initial-controllers",
            initial,
            *_overrides(node),
        )
        assert formatted.returncode == 0, formatted.stderr
        assert _directory_id(node) == directory_ids[node_id - 1]
        cluster.nodes[node_id] = node
    cluster.launch()
    quorum = _quorum(",".join(f"127.0.0.1:{ports[i][1]}" for i in (1, 2, 3)))
    assert [v.replica_id for v in quorum.voters] == [1, 2, 3]
    assert [v.directory_id for v in quorum.voters] == directory_ids
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("three-initial", 3, 3)])["three-initial"].result(30)


def test_misconfigured_dynamic_voters_stop_with_one_line(tmp_path: Path) -> None:
    port, controller = free_port(), free_port()
    base = [
        "--override",
        "node.id=1",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "--override",
        f"log.dirs={tmp_path / 'node'}",
    ]
    both = [
        *base,
        "--override",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        "--override",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
    ]
    dynamic = [*base, "--override", f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}"]
    static = [*base, "--override", f"controller.quorum.voters=1@127.0.0.1:{controller}"]
    cases = [
        (("server", *both), "are both set"),
        (("storage", "format", *dynamic), "needs one of --standalone"),
        (("storage", "format", "--standalone", *static), "controller.quorum.voters is set"),
        (
            ("storage", "format", "--standalone", "--no-initial-controllers", *dynamic),
            "use only one of",
        ),
        (
            ("storage", "format", "--initial-controllers", "2@127.0.0.1:1:x", *dynamic),
            "must look like id@host:port:directoryid",
        ),
    ]
    for arguments, message in cases:
        result = _moldau(*arguments)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.returncode == 2, (arguments, result.stderr)
        assert len(errors) == 1 and message in errors[0], (arguments, result.stderr)
    # Storage formatted --standalone refuses to start with static voters.
    assert _moldau("storage", "format", "--standalone", *dynamic).returncode == 0
    result = _moldau("server", *static)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode != 0 and len(errors) == 1, result.stderr
    assert "formatted for dynamic voters" in errors[0], result.stderr


def test_a_voter_restarted_on_another_port_updates_its_endpoint(
    growing_cluster: Cluster,
) -> None:
    cluster = growing_cluster
    first, second = cluster.nodes[1], cluster.nodes[2]
    controllers = f"127.0.0.1:{first.controller_port}"
    cluster.launch([2])
    wait_for(lambda: _add(second, controllers), timeout_s=30, what="node 2 added")
    assert _quorum(controllers).endpoints[2] == f"127.0.0.1:{second.controller_port}"
    # Node 2 comes back on another controller port: it sends UpdateRaftVoter to the leader.
    moved = free_port()
    second.controller_port = moved
    listeners = f"PLAINTEXT://127.0.0.1:{second.client_port},CONTROLLER://127.0.0.1:{moved}"
    second.overrides["listeners"] = listeners
    assert second.server is not None
    second.server.restart(listeners=listeners)
    wait_for(
        lambda: _quorum(controllers).endpoints[2] == f"127.0.0.1:{moved}",
        timeout_s=30,
        what="node 2's new endpoint in the voter set",
    )
    # Both voters commit (a majority of two needs node 2) and name it at its new address.
    quorum = _quorum(f"127.0.0.1:{moved}")
    assert [v.replica_id for v in quorum.voters] == [1, 2]
    admin = AdminClient({"bootstrap.servers": second.bootstrap})
    admin.create_topics([NewTopic("after-the-move", 1, 1)])["after-the-move"].result(30)


def test_a_broker_finds_dynamic_controllers_through_the_bootstrap_servers(
    start_server, tmp_path: Path
) -> None:
    """Controllers apart from brokers: a controller-only node formatted --standalone, a
    broker-only node that knows only controller.quorum.bootstrap.servers."""
    cluster_id = _moldau("storage", "random-uuid").stdout.strip()
    cluster = Cluster(cluster_id=cluster_id, factory=start_server)
    controller_port, broker_port = free_port(), free_port()
    bootstrap = f"127.0.0.1:{controller_port}"
    controller = ClusterNode(
        node_id=1,
        roles="controller",
        client_port=None,
        controller_port=controller_port,
        data_dir=tmp_path / "controller",
        overrides={
            "node.id": "1",
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{controller_port}",
            "controller.quorum.bootstrap.servers": bootstrap,
            "log.dirs": str(tmp_path / "controller"),
            **FAST,
        },
    )
    broker = ClusterNode(
        node_id=2,
        roles="broker",
        client_port=broker_port,
        controller_port=None,
        data_dir=tmp_path / "broker",
        overrides={
            "node.id": "2",
            "process.roles": "broker",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "controller.quorum.bootstrap.servers": bootstrap,
            "log.dirs": str(tmp_path / "broker"),
            **FAST,
        },
    )
    formatted = _moldau(
        "storage", "format", "-t", cluster_id, "--standalone", *_overrides(controller)
    )
    assert formatted.returncode == 0, formatted.stderr
    formatted = _moldau("storage", "format", "-t", cluster_id, *_overrides(broker))
    assert formatted.returncode == 0, formatted.stderr
    cluster.nodes = {1: controller, 2: broker}
    cluster.launch()
    quorum = _quorum(bootstrap)
    assert [v.replica_id for v in quorum.voters] == [1]
    assert [o.replica_id for o in quorum.observers] == [2]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("through-the-broker", 2, 1)])["through-the-broker"].result(30)
    wait_for(
        lambda: "through-the-broker" in admin.list_topics(timeout=10).topics,
        timeout_s=15,
        what="the new topic in the broker's metadata",
    )
    assert set(admin.list_topics(timeout=10).brokers) == {2}
    cluster.stop(2)  # the broker first: its controlled shutdown needs the controller
