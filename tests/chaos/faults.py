"""Process faults on a cluster of real `moldau server` processes (tests/integration/cluster.py),
and what the nemesis needs to aim them: the leader and replicas of each partition, the active
controller, whether the cluster has healed. Network faults are cuts of the nodes' `Network`
(tests/integration/netns.py), healed with the rest.

Every signal goes to a PID this suite started (a node's `MoldauServer.process`), never by name.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient

from tests.integration.cluster import Cluster, ClusterNode
from tests.integration.netns import Network
from tests.integration.wire import Connection

if TYPE_CHECKING:
    from .clock import WallClocks


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class Nodes:
    """The nodes' process states as the nemesis left them: running, killed or paused; and their
    network's cuts, when they run in namespaces."""

    def __init__(self, cluster: Cluster, network: Network | None = None) -> None:
        self.cluster = cluster
        self.network = network
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self.clocks: WallClocks | None = None  # each node's wall-clock offset (clock.py)

    def running(self) -> list[ClusterNode]:
        return [
            node
            for node in self.cluster.nodes.values()
            if node.node_id not in self.killed and node.node_id not in self.paused
        ]

    def bootstrap(self) -> str:
        """The brokers that can answer now (all of them when none can: clients wait)."""
        alive = [node for node in self.running() if node.is_broker]
        return ",".join(node.bootstrap for node in alive or self.cluster.brokers())

    def kill(self, node_id: int) -> None:
        """SIGKILL: no controlled shutdown, no flush of anything not yet fsynced."""
        if node_id in self.paused:
            self.resume(node_id)
        self.cluster.kill(node_id)
        self.killed.add(node_id)

    def restart(self, node_id: int) -> None:
        self.cluster.launch([node_id])
        self.killed.discard(node_id)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process keeps its sockets and its belief that it leads, and does nothing."""
        os.kill(self.cluster.nodes[node_id].pid, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        os.kill(self.cluster.nodes[node_id].pid, signal.SIGCONT)
        self.paused.discard(node_id)

    def heal(self) -> None:
        """Every cut healed, every clock set right, every paused node resumed, every killed node
        started again (together: a cold start needs a quorum of them before any is ready)."""
        if self.network is not None:
            self.network.heal()
        if self.clocks is not None:
            self.clocks.reset()
        for node_id in sorted(self.paused):
            self.resume(node_id)
        if self.killed:
            self.cluster.launch(sorted(self.killed))
            self.killed.clear()


def partition_states(bootstrap: str, topics: list[str]) -> list[PartitionState]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
    states = []
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            raise LookupError(
                f"topic {topic} not in the metadata ({described and described.error})"
            )
        for partition in described.partitions.values():
            states.append(
                PartitionState(
                    topic=topic,
                    partition=partition.id,
                    leader=partition.leader,
                    replicas=tuple(sorted(partition.replicas)),
                    isr=tuple(sorted(partition.isrs)),
                )
            )
    return sorted(states, key=lambda state: (state.topic, state.partition))


def active_controller(nodes: Nodes) -> int:
    """The quorum's leader, asked with DescribeQuorum of the running brokers."""
    for node in nodes.running():
        if not node.is_broker:
            continue
        try:
            with Connection(node.host, int(node.bootstrap.split(":")[1]), timeout=5) as wire:
                response = wire.request(
                    55,
                    0,
                    {
                        "topics": [
                            {
                                "topic_name": "__cluster_metadata",
                                "partitions": [{"partition_index": 0}],
                            }
                        ]
                    },
                )
        except OSError:
            continue
        partition = response.topics[0].partitions[0]
        if response.error_code == 0 and partition.error_code == 0 and partition.leader_id >= 0:
            return int(partition.leader_id)
    raise LookupError("no running broker names a quorum leader")


def healed(nodes: Nodes, topics: list[str]) -> bool:
    """Every node runs and every partition of `topics` has a leader and its whole replica set in
    sync, as each broker sees it."""
    network = nodes.network
    if (
        nodes.killed
        or nodes.paused
        or (network is not None and (network.cuts or network.slow_links))
    ):
        return False
    for node in nodes.cluster.brokers():
        for state in partition_states(node.bootstrap, topics):
            if state.leader < 0 or state.isr != state.replicas:
                return False
    return True


def wait_until(condition, *, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    """Poll `condition` until it holds; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception as error:  # between leaders, a node restarting: ask again
            last_error = str(error)  # (not the exception: see tests.integration.cluster.wait_for)
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not happen within {timeout_s:.0f} s (last error: {last_error})")
