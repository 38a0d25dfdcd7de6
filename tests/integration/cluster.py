"""A Moldau cluster on loopback for the tests: several `moldau server` processes that differ only
in `node.id`, ports and `log.dirs`, each directory formatted first with `moldau storage format -t
CLUSTER_ID` and the node's own settings (the shape of kafka-storage format + kafka-server-start).

Ports are picked free before the nodes start (the voters' controller addresses must be known to
every node). Every node is a `MoldauServer` of the test's server factory, so the test stops each
one by PID and requires a clean exit.

With a `Network` (tests/integration/netns.py) each node runs in its own network namespace instead,
listening on and advertising its namespace's address (fixed ports: the address is its own) for
every listener and in `controller.quorum.voters`; clients stay in the root namespace and reach the
nodes through the network's bridge.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import moldau
from moldau.raft.meta_properties import random_uuid_string

from .conftest import MoldauServer, ServerFactory
from .netns import Network, require_namespaces

COMBINED = "broker,controller"
BROKER = "broker"
CONTROLLER = "controller"
LOOPBACK = "127.0.0.1"
NAMESPACE_CLIENT_PORT = 9092  # a node in a namespace of its own has its address to itself
NAMESPACE_CONTROLLER_PORT = 9093
KILL_TIMEOUT_S = 30.0  # a process in an uninterruptible wait (disk I/O) dies only once it returns


_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now, and one this process has not handed out before (the
    kernel may offer a port just released again: two nodes of one cluster must not get it)."""
    while True:
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            port = int(probe.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


@dataclass
class ClusterNode:
    node_id: int
    roles: str
    client_port: int | None
    controller_port: int | None
    data_dir: Path
    overrides: dict[str, str]
    server: MoldauServer | None = None
    host: str = LOOPBACK  # where its listeners are bound and advertised
    namespace: str | None = None  # the network namespace its process runs in
    environment: dict[str, str] = field(default_factory=dict)  # added to the process's, at launch

    @property
    def bootstrap(self) -> str:
        assert self.client_port is not None, f"node {self.node_id} has no broker listener"
        return f"{self.host}:{self.client_port}"

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles.split(",")

    @property
    def pid(self) -> int:
        assert self.server is not None and self.server.process is not None
        return self.server.process.pid


@dataclass
class Cluster:
    cluster_id: str
    nodes: dict[int, ClusterNode] = field(default_factory=dict)
    factory: ServerFactory | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.brokers())

    def bootstrap_without(self, node_id: int) -> str:
        """The bootstrap list of the brokers other than `node_id` (one that is down)."""
        return ",".join(node.bootstrap for node in self.brokers() if node.node_id != node_id)

    def brokers(self) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node.is_broker]

    def launch(self, node_ids: Iterable[int] | None = None, *, wait: bool = True) -> None:
        """Start the nodes' processes (all of them by default), then wait for each to be ready
        (unless not to `wait`: `node.server.wait_ready()` then)."""
        assert self.factory is not None
        chosen = [self.nodes[i] for i in (node_ids or self.nodes)]
        for node in chosen:
            if node.server is None:
                node.server = self.factory(
                    launch_only=True,
                    namespace=node.namespace,
                    environment=node.environment,
                    **_as_kwargs(node.overrides),
                )
            else:
                node.server.launch()
        for node in chosen if wait else ():
            assert node.server is not None
            node.server.wait_ready()

    def kill(self, node_id: int) -> None:
        """SIGKILL: no controlled shutdown, no flush."""
        server = self.nodes[node_id].server
        assert server is not None and server.process is not None
        server.process.kill()
        try:
            server.process.wait(KILL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"node {node_id} (pid {server.process.pid}) was still there {KILL_TIMEOUT_S:.0f} s "
                f"after SIGKILL: {_process_state(server.process.pid)}"
            ) from None
        server.process = None

    def stop(self, node_id: int) -> None:
        server = self.nodes[node_id].server
        assert server is not None
        server.stop()

    def stop_all(self) -> None:
        """SIGTERM to every running node at once, then a clean exit of each required (one after
        the other, the last would wait for a quorum that has gone)."""
        running = [
            node.server
            for node in self.nodes.values()
            if node.server is not None and node.server.process is not None
        ]
        for server in running:
            server.signal_stop()
        for server in running:
            server.wait_stopped()


def _as_kwargs(overrides: dict[str, str]) -> dict[str, str]:
    return {key.replace(".", "_"): value for key, value in overrides.items()}


def build_cluster(
    start_server: ServerFactory,
    base: Path,
    *,
    roles: list[str],
    extra: dict[str, str] | None = None,
    per_node: dict[int, dict[str, str]] | None = None,
    launch: bool = True,
    network: Network | None = None,
    client_listener: str = "PLAINTEXT",
    format_arguments: Sequence[str] = (),
) -> Cluster:
    """Nodes 1..n with the given roles; voters are the nodes with the controller role. `extra`
    goes to every node, `per_node[n]` to node n only. `network`: each node in its namespace of
    that network (set up, with these node ids), on its address. `client_listener`: the name of
    the brokers' listener (SSL for a cluster over TLS, with its protocol map in `extra`).
    `format_arguments`: more arguments for `moldau storage format` (`--add-scram ...`)."""
    cluster_id = random_uuid_string()  # (what `moldau storage random-uuid` prints)
    cluster = Cluster(cluster_id=cluster_id, factory=start_server)
    for index, role in enumerate(roles, start=1):
        is_controller = CONTROLLER in role.split(",")
        is_broker = BROKER in role.split(",")
        in_namespace = network is not None
        cluster.nodes[index] = ClusterNode(
            node_id=index,
            roles=role,
            client_port=(NAMESPACE_CLIENT_PORT if in_namespace else free_port())
            if is_broker
            else None,
            controller_port=(NAMESPACE_CONTROLLER_PORT if in_namespace else free_port())
            if is_controller
            else None,
            data_dir=base / f"node-{index}",
            overrides={},
            host=LOOPBACK if network is None else network.address(index),
            namespace=None if network is None else network.namespace(index),
        )
    voters = ",".join(
        f"{node.node_id}@{node.host}:{node.controller_port}"
        for node in cluster.nodes.values()
        if node.controller_port is not None
    )
    for node in cluster.nodes.values():
        listeners = []
        if node.client_port is not None:
            listeners.append(f"{client_listener}://{node.host}:{node.client_port}")
        if node.controller_port is not None:
            listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
        node.overrides = {
            "node.id": str(node.node_id),
            "process.roles": node.roles,
            "listeners": ",".join(listeners),
            "controller.quorum.voters": voters,
            "log.dirs": str(node.data_dir),
            **(extra or {}),
            **(per_node or {}).get(node.node_id, {}),
        }
    format_storages(
        cluster_id, [node.overrides for node in cluster.nodes.values()], format_arguments
    )
    if launch:
        cluster.launch()
    return cluster


@contextmanager
def cluster_in_namespaces(
    start_server: ServerFactory,
    base: Path,
    *,
    roles: list[str],
    extra: dict[str, str] | None = None,
) -> Iterator[tuple[Cluster, Network]]:
    """A cluster of `build_cluster`, each node in its namespace of a new `Network`; on leaving,
    the cuts healed, every node stopped (by PID, a clean exit required), then the network torn
    down. Skips the test when namespaces cannot be created here."""
    require_namespaces()
    with Network(range(1, len(roles) + 1)) as network:
        cluster = build_cluster(start_server, base, roles=roles, extra=extra, network=network)
        try:
            yield cluster, network
        finally:
            network.heal()
            cluster.stop_all()


def format_storage(
    cluster_id: str, overrides: dict[str, str], extra_arguments: Sequence[str] = ()
) -> None:
    format_storages(cluster_id, [overrides], extra_arguments)


def format_storages(
    cluster_id: str, each: Sequence[dict[str, str]], extra_arguments: Sequence[str] = ()
) -> None:
    """`moldau storage format` for every node's properties at once (one process each)."""
    processes = []
    for overrides in each:
        arguments = [sys.executable, "-m", "moldau", "storage", "format", "-t", cluster_id]
        arguments += extra_arguments
        for key, value in overrides.items():
            arguments += ["--override", f"{key}={value}"]
        processes.append(
            subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    failures = []
    for process in processes:
        output, _ = process.communicate(timeout=60)
        if process.returncode != 0:
            failures.append(f"exit {process.returncode}: {output.strip()[-2000:]}")
    assert not failures, f"moldau storage format failed: {failures}"


def wait_for(condition: Callable[[], object], *, timeout_s: float, what: str) -> object:
    """Poll `condition` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            result = condition()
        except Exception as error:  # the cluster may be between leaders: ask again
            # (only the text: the exception's traceback holds this frame and the clients on the
            # condition's frames, a cycle that would keep librdkafka threads alive until a GC)
            last_error = str(error)
            result = None
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(
        f"{what} did not happen within {timeout_s:.0f} s (last error: {last_error})"
    )


def create_replicated_topic(client: dict[str, str], topic: str) -> int:
    """Create `topic` with one partition on three replicas (min.insync.replicas 2) through the
    client settings `client`, wait for an ISR of three, and return its leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client)
    new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)

    def fully_replicated() -> object:
        found = admin.list_topics(timeout=5).topics.get(topic)
        if found is None or found.error is not None:
            return None
        partition = found.partitions[0]
        return partition if sorted(partition.isrs) == [1, 2, 3] else None

    partition: Any = wait_for(fully_replicated, timeout_s=30, what="an ISR of three")
    return int(partition.leader)


def read_partition(client: dict[str, str], topic: str, count: int, *, what: str) -> list[bytes]:
    """The first `count` records of partition 0 of `topic`, read with the settings `client`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**client, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def read_all() -> object:
        for message in consumer.consume(num_messages=count, timeout=0.5):
            if message.error() is None:
                received.append(message.value())
        return len(received) >= count

    try:
        wait_for(read_all, timeout_s=30, what=what)
    finally:
        consumer.close()
    return received


def _process_state(pid: int) -> str:
    """What the kernel says a process is doing (its state and the call it waits in), for a
    failure message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as error:
        return f"its /proc entry could not be read ({error})"
    state = next((line for line in status.splitlines() if line.startswith("State:")), "State: ?")
    return f"{state.strip()}, waiting in {wchan or '?'}"


@contextmanager
def controller_and_broker_in_process(
    tmp_path: Path, *, common: dict[str, str], broker: dict[str, str] | None = None
) -> Iterator[str]:
    """A controller-only node (1, the quorum's single voter) and a broker-only node (2), each a
    `moldau.Server` on its own loop in this process (so that a test may patch what they run),
    listeners CONTROLLER and BROKER on loopback; `common` settings (security, timings) go to
    both, `broker` to the broker alone. Yields the broker's bootstrap address."""
    controller_port, broker_port = free_port(), free_port()
    shared = {"controller.quorum.bootstrap.servers": f"{LOOPBACK}:{controller_port}", **common}
    controller_config = {
        **shared,
        "node.id": "1",
        "process.roles": "controller",
        "listeners": f"CONTROLLER://{LOOPBACK}:{controller_port}",
        "log.dirs": str(tmp_path / "controller"),
    }
    broker_config = {
        **shared,
        "node.id": "2",
        "process.roles": "broker",
        "listeners": f"BROKER://{LOOPBACK}:{broker_port}",
        "log.dirs": str(tmp_path / "broker"),
        "inter.broker.listener.name": "BROKER",
        **(broker or {}),
    }
    cluster_id = random_uuid_string()
    format_storage(cluster_id, controller_config, ["--standalone"])
    format_storage(cluster_id, broker_config)
    with moldau.Server(config=controller_config), moldau.Server(config=broker_config):
        yield f"{LOOPBACK}:{broker_port}"
