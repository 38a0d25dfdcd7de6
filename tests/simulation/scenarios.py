"""Randomised runs of a quorum under faults, one per seed: a nemesis partitions, cuts links one
way, builds a bridge, crashes and restarts nodes and makes the network lossy while clients keep
appending; then everything heals and the quorum must elect a leader and commit again within a
bound. The invariants are checked after every step throughout (`invariants.py`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from moldau.raft.node import RaftNode
from moldau.raft.quorum_config import QuorumConfig
from tests.simulation.cluster import DiskConditions, NetworkConditions, SimulatedCluster
from tests.simulation.forgery import Forger

# After the last fault heals, the quorum has this long (simulated seconds) to elect a leader
# and commit a new entry on every live node. Elections take one to two election timeouts
# (1-2 s) plus backoffs; several may collide.
RECOVERY_BOUND = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    seed: int
    steps: int
    committed: int
    leaders: int
    snapshots_installed: int
    recovery_time: float
    forged: int = 0
    refused: int = 0


class RecoveryFailure(AssertionError):
    pass


def run_with_faults(
    seed: int,
    *,
    voters: tuple[int, ...],
    observers: tuple[int, ...] = (),
    duration: float = 15.0,
    append_interval: float = 0.1,
    snapshots: bool = True,
    node_factory: Callable[..., RaftNode] = RaftNode,
    dynamic: bool = False,
    bootstrap: tuple[int, ...] = (),
    voter_changes: bool = False,
    kraft_upgrade: bool = False,
    forger: bool = False,
) -> RunResult:
    """`dynamic`: `voters` are the initial voters of a quorum with dynamic voters (KIP-853)
    and `observers` join through `bootstrap`; `voter_changes`: an operator adds and removes
    voters (the leader among them) throughout; `kraft_upgrade`: an operator upgrades the static
    quorum to kraft.version 1 at some point of the run (retrying until a leader takes it), and
    after healing every node must hold the dynamic voter set; `forger`: forged messages
    (`forgery.py`) reach random nodes throughout, the disruptive kinds until the faults stop
    (not with voter changes) and the refused ones through the recovery too."""
    conditions = random.Random(seed * 7919 + 1)
    network = NetworkConditions(
        loss=conditions.choice([0.0, 0.01, 0.05, 0.15]),
        duplication=conditions.choice([0.0, 0.0, 0.02, 0.1]),
        min_delay=0.0005,
        max_delay=conditions.choice([0.002, 0.02, 0.2]),
    )
    disk = DiskConditions(max_flush=conditions.choice([0.001, 0.01, 0.05]))
    # Small fetches take entries one or two at a time, which opens windows (a new leader's
    # older entries on a majority before its own first entry) that large ones close.
    config = QuorumConfig(
        fetch_max_bytes=conditions.choice([8 * 1024 * 1024, 100]),
        snapshot_chunk_bytes=conditions.choice([1024 * 1024, 200]),
    )
    cluster = SimulatedCluster(
        seed=seed,
        voters=voters,
        observers=observers,
        config=config,
        network=network,
        disk=disk,
        node_factory=node_factory,
        dynamic=dynamic,
        bootstrap=bootstrap,
    )
    cluster.note(f"network {network}, disk {disk}, {config}")
    nemesis = Nemesis(cluster)
    cluster.start_all()
    _keep_appending(cluster, until=duration, interval=append_interval)
    if snapshots:
        _keep_snapshotting(cluster, until=duration)
    nemesis.schedule_faults(until=duration)
    if voter_changes:
        _keep_changing_voters(cluster, until=duration)
    if kraft_upgrade:
        _upgrade_kraft_version(cluster, until=duration)
    if forger:
        # With voter changes, the disruptive kinds are left out: a voter told of a later epoch
        # may be removed before it stands, and an observer stranded at a later epoch stays
        # there (`forgery.py`).
        disruptive_until = 0.0 if voter_changes else duration
        Forger(cluster).schedule(until=duration + RECOVERY_BOUND, disruptive_until=disruptive_until)
    cluster.run_until(duration)
    recovery_time = recover(cluster)
    if kraft_upgrade:
        upgrade_after_healing(cluster)
    cluster.checker.assert_converged()
    return RunResult(
        seed=seed,
        steps=cluster.steps,
        committed=cluster.checker.committed_end,
        leaders=len(cluster.checker.leaders),
        snapshots_installed=cluster.snapshots_installed,
        recovery_time=recovery_time,
        forged=cluster.forged,
        refused=sum(cluster.refused.values()),
    )


def _keep_appending(cluster: SimulatedCluster, *, until: float, interval: float) -> None:
    """Clients offer records every `interval` on average, mostly to the leader."""

    def append() -> None:
        if cluster.now >= until:
            return
        target = cluster.random.choice([None, None, *cluster.nodes])
        cluster.client_append(target)
        cluster.schedule(cluster.random.uniform(0.0, 2 * interval), append)

    cluster.schedule(cluster.random.uniform(0.0, 0.2), append)


def _keep_snapshotting(cluster: SimulatedCluster, *, until: float) -> None:
    """Now and then a node's state machine snapshots what it applied and its log drops that
    prefix, so nodes that fall behind must catch up from a snapshot."""

    def snapshot() -> None:
        if cluster.now >= until:
            return
        cluster.take_snapshot(cluster.random.choice(list(cluster.nodes)))
        cluster.schedule(cluster.random.uniform(0.2, 2.0), snapshot)

    cluster.schedule(cluster.random.uniform(0.5, 2.0), snapshot)


def _keep_changing_voters(cluster: SimulatedCluster, *, until: float) -> None:
    """An operator adds an observer as a voter or removes a voter (now and then the leader),
    one change at a time as the leader allows, keeping one to five voters."""

    def change() -> None:
        if cluster.now >= until:
            return
        leader_id = cluster.leader_id()
        raft = cluster.nodes[leader_id].raft if leader_id is not None else None
        if raft is not None:
            voters = set(raft.voters)
            others = [n for n in cluster.nodes if n not in voters]
            choice = cluster.random.random()
            if others and (len(voters) == 1 or choice < 0.55):
                cluster.add_voter(cluster.random.choice(others))
            elif len(voters) > 1 and choice < 0.7 and leader_id in voters:
                cluster.remove_voter(leader_id)
            elif len(voters) > 1:
                cluster.remove_voter(cluster.random.choice(sorted(voters)))
        cluster.schedule(cluster.random.uniform(0.1, 1.5), change)

    cluster.schedule(cluster.random.uniform(0.5, 1.5), change)


def _upgrade_kraft_version(cluster: SimulatedCluster, *, until: float) -> None:
    """From some point of the run an operator asks the leader for kraft.version 1, again and
    again (the leader refuses until it knows every voter's directory id), until it holds."""

    def upgrade() -> None:
        if cluster.now >= until or _upgrade_committed(cluster):
            return
        cluster.upgrade_kraft_version(validate_only=cluster.random.random() < 0.2)
        cluster.schedule(cluster.random.uniform(0.1, 1.0), upgrade)

    cluster.schedule(cluster.random.uniform(0.5, until / 2), upgrade)


def _upgrade_committed(cluster: SimulatedCluster) -> bool:
    return any(
        node.raft is not None and node.raft.kraft_version_at(node.raft.high_watermark - 1) >= 1
        for node in cluster.live_nodes()
    )


def upgrade_after_healing(cluster: SimulatedCluster) -> None:
    """Finish the upgrade if the faults kept it from committing, then check that every live
    node holds the dynamic voter set: the leader's, with every voter's directory id."""
    deadline = cluster.now + RECOVERY_BOUND
    while not _upgrade_committed(cluster) and cluster.now < deadline:
        cluster.upgrade_kraft_version()
        cluster.run_for(0.2)
    appended = None
    while cluster.now < deadline:
        if appended is None or not _still_possible(cluster, appended):
            appended = cluster.client_append()
        if appended is not None and _committed_everywhere(cluster, appended[2]):
            break
        cluster.run_for(0.05)
    leader_id = cluster.leader_id()
    assert leader_id is not None, cluster.describe_state()
    voters = cluster.nodes[leader_id].raft.voter_set  # type: ignore[union-attr]
    for node in cluster.live_nodes():
        raft = node.raft
        assert raft is not None
        if raft.kraft_version != 1 or raft.voter_set != voters:
            raise RecoveryFailure(
                f"node {node.node_id} ends with kraft.version {raft.kraft_version} and voters "
                f"{raft.voter_set}, the leader with {voters}\n{cluster.describe_state()}"
            )
    if any(voter.directory_id is None for voter in voters):
        raise RecoveryFailure(f"the upgraded voter set lacks directory ids: {voters}")


class Nemesis:
    """Faults, one at a time, each lasting a while before the next replaces it."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.random = cluster.random
        self.base_loss = cluster.network.loss
        self.faults: list[Callable[[], str]] = [
            self.heal,
            self.partition,
            self.isolate_leader,
            self.leader_cannot_send,
            self.leader_cannot_hear,
            self.bridge,
            self.crash_one,
            self.crash_leader,
            self.lossy,
        ]

    def schedule_faults(self, *, until: float) -> None:
        def next_fault() -> None:
            if self.cluster.now >= until:
                return
            fault = self.random.choice(self.faults)
            self.cluster.note(f"nemesis: {fault()}")
            self.cluster.schedule(self.random.uniform(0.2, 3.0), next_fault)

        self.cluster.schedule(self.random.uniform(0.5, 2.0), next_fault)

    def _restore_network(self) -> None:
        self.cluster.heal()
        self.cluster.network.loss = self.base_loss

    def heal(self) -> str:
        self._restore_network()
        for node_id, node in self.cluster.nodes.items():
            if not node.alive:
                self.cluster.start(node_id)
        return "heal"

    def partition(self) -> str:
        self._restore_network()
        nodes = list(self.cluster.nodes)
        self.random.shuffle(nodes)
        cut = self.random.randrange(1, len(nodes))
        groups = (tuple(nodes[:cut]), tuple(nodes[cut:]))
        self.cluster.partition(*groups)
        return f"partition {groups}"

    def isolate_leader(self) -> str:
        self._restore_network()
        leader = self.cluster.leader_id()
        if leader is None:
            return "isolate leader: none"
        self.cluster.isolate(leader)
        return f"isolate leader {leader}"

    def leader_cannot_send(self) -> str:
        return self._cut_leader(outgoing=True)

    def leader_cannot_hear(self) -> str:
        return self._cut_leader(outgoing=False)

    def _cut_leader(self, *, outgoing: bool) -> str:
        """Cut the leader's links one way only."""
        self._restore_network()
        leader = self.cluster.leader_id()
        if leader is None:
            return "one-way: no leader"
        for other in self.cluster.nodes:
            if other != leader:
                link = (leader, other) if outgoing else (other, leader)
                self.cluster.cut(*link)
        return f"leader {leader} cannot {'send' if outgoing else 'hear'}"

    def bridge(self) -> str:
        """Two sides that reach each other only through one node in the middle."""
        self._restore_network()
        nodes = list(self.cluster.nodes)
        self.random.shuffle(nodes)
        middle, rest = nodes[0], nodes[1:]
        half = len(rest) // 2
        left, right = rest[:half], rest[half:]
        for a in left:
            for b in right:
                self.cluster.cut(a, b)
                self.cluster.cut(b, a)
        return f"bridge {left} <-> {middle} <-> {right}"

    def crash_one(self) -> str:
        node_id = self.random.choice(list(self.cluster.nodes))
        return self._crash(node_id)

    def crash_leader(self) -> str:
        leader = self.cluster.leader_id()
        return self._crash(leader) if leader is not None else "crash leader: none"

    def _crash(self, node_id: int) -> str:
        self.cluster.crash(node_id)
        incarnation = self.cluster.nodes[node_id].incarnation

        def restart() -> None:
            node = self.cluster.nodes[node_id]
            if not node.alive and node.incarnation == incarnation:
                self.cluster.start(node_id)

        self.cluster.schedule(self.random.uniform(0.05, 4.0), restart)
        return f"crash {node_id}"

    def lossy(self) -> str:
        self._restore_network()
        self.cluster.network.loss = self.random.choice([0.3, 0.6])
        return f"lossy network ({self.cluster.network.loss})"


def recover(cluster: SimulatedCluster) -> float:
    """Heal everything; the quorum must then elect a leader and commit a fresh entry on every
    live node within RECOVERY_BOUND. Returns how long that took."""
    started = cluster.now
    cluster.heal()
    cluster.network.loss = min(cluster.network.loss, 0.01)
    for node_id, node in cluster.nodes.items():
        if not node.alive:
            cluster.start(node_id)
    deadline = started + RECOVERY_BOUND
    appended: tuple[int, int, int] | None = None
    while cluster.now < deadline:
        if appended is None or not _still_possible(cluster, appended):
            appended = cluster.client_append()
        if appended is not None and _committed_everywhere(cluster, appended[2]):
            return cluster.now - started
        cluster.run_for(0.05)
    raise RecoveryFailure(
        f"no leader committed a new entry on every live node within {RECOVERY_BOUND}s of "
        f"healing (appended: {appended})\n{cluster.describe_state()}"
    )


def _still_possible(cluster: SimulatedCluster, appended: tuple[int, int, int]) -> bool:
    """The entry may still commit: its leader still leads the epoch it was appended in."""
    node_id, epoch, _ = appended
    raft = cluster.nodes[node_id].raft
    return raft is not None and raft.is_leader and raft.epoch == epoch


def _committed_everywhere(cluster: SimulatedCluster, offset: int) -> bool:
    return all(node.applied_offset > offset for node in cluster.live_nodes())
