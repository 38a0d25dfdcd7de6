"""A whole Raft quorum in one process: `RaftNode`s over an in-memory network and disks, driven by
a seeded deterministic scheduler on a manual clock.

Everything random (latencies, losses, timeouts of the nodes, faults) comes from one
`random.Random(seed)`, and events at the same instant run in the order they were scheduled, so a
seed replays exactly. The harness plays the driver: it executes each step's actions in order
(persist, append, truncate, flush with a simulated latency, commit, send) and, after every step,
asks the `InvariantChecker` whether anything Raft promises was broken.

The network models Kafka's connections: a message may be lost, delayed, duplicated or reordered;
a link may be cut one way; a message addressed to a node that restarted since (its connection
died with it) is never delivered. A crash loses every unflushed log entry; the quorum-state file
is written synchronously, so it survives.
"""

from __future__ import annotations

import ast
import collections
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.protocol.errors import KafkaError
from moldau.raft.control_records import bootstrap_checkpoint, snapshot_header, split_snapshot
from moldau.raft.events import (
    AddVoter,
    AppendToLog,
    ClientAppend,
    CommitUpTo,
    FlushLog,
    InstallSnapshot,
    LeaderChanged,
    LogFlushed,
    PersistElectionState,
    RaftAction,
    RaftEvent,
    Receive,
    Refused,
    RemoveVoter,
    Resign,
    Send,
    Start,
    Tick,
    TruncateLog,
    UpgradeKRaftVersion,
    WriteSnapshotChunk,
)
from moldau.raft.log import LogEntry, MemoryReplicatedLog, OffsetAndEpoch
from moldau.raft.messages import RaftMessage, RaftRequest
from moldau.raft.node import NotLeaderError, RaftNode, Role
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import MemoryQuorumStateStore
from moldau.raft.snapshots import MemorySnapshotStore
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, Endpoint, VoterNode, VoterSet
from tests.simulation.invariants import InvariantChecker

REQUEST_TYPES = tuple(RaftRequest.__args__)  # type: ignore[attr-defined]


@dataclass(slots=True, kw_only=True)
class NetworkConditions:
    loss: float = 0.0
    duplication: float = 0.0
    min_delay: float = 0.001
    max_delay: float = 0.010


@dataclass(slots=True, kw_only=True)
class DiskConditions:
    min_flush: float = 0.0005
    max_flush: float = 0.005


@dataclass(order=True, slots=True)
class _Scheduled:
    time: float
    sequence: int
    action: Callable[[], None] = field(compare=False)


class SimulatedNode:
    """One node's process: its RaftNode (rebuilt on restart), disk and quorum-state file."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.directory_id = f"directory-{node_id}"
        self.disk = MemoryReplicatedLog()
        self.store = MemoryQuorumStateStore()
        self.snapshots = MemorySnapshotStore()
        self.raft: RaftNode | None = None
        self.incarnation = 0
        self.alive = False
        self.flushing = False
        self.tick_at: float | None = None
        self.applied: list[LogEntry] = []  # the state machine: committed entries, in order
        self.applied_offset = 0
        self.high_watermark = 0
        self.leader_changes: list[tuple[int | None, int]] = []


class SimulatedCluster:
    # When a list, every cluster built is added to it (so a failing run's trace can be shown).
    created: list[SimulatedCluster] | None = None

    def __init__(
        self,
        *,
        seed: int,
        voters: tuple[int, ...],
        observers: tuple[int, ...] = (),
        config: QuorumConfig | None = None,
        network: NetworkConditions | None = None,
        disk: DiskConditions | None = None,
        node_factory: Callable[..., RaftNode] = RaftNode,
        trace_limit: int = 400,
        dynamic: bool = False,
        bootstrap: tuple[int, ...] = (),
    ) -> None:
        """`dynamic`: the voters are written into the initial voters' bootstrap checkpoints
        (`moldau storage format --standalone/--initial-controllers`), and the other nodes find
        the quorum through `bootstrap` (KIP-853); else `voters` is the static voter set."""
        self.seed = seed
        self.random = random.Random(seed)
        self.voters = voters
        self.dynamic = dynamic
        self.bootstrap = bootstrap
        self.config = config or QuorumConfig()
        self.network = network or NetworkConditions()
        self.disk = disk or DiskConditions()
        self.node_factory = node_factory
        self.now = 0.0
        self.nodes = {i: SimulatedNode(i) for i in (*voters, *observers)}
        self.cut_links: set[tuple[int, int]] = set()
        self.checker = InvariantChecker(self)
        self._queue: list[_Scheduled] = []
        self._sequence = 0
        self._reply_incarnation: dict[tuple[int, int, int], int] = {}
        self._client_counter = 0
        self.steps = 0
        self.delivering: RaftMessage | None = None  # the message the current step received
        self.sent: collections.Counter[tuple[int, str]] = collections.Counter()
        self.snapshots_installed = 0
        self.forged = 0  # messages injected by a forger (`forgery.py`)
        self.refused: collections.Counter[str] = collections.Counter()  # Refused, by kind
        # The last events, formatted only when a failure shows them.
        self.trace: collections.deque[tuple[float, int | None, object]] = collections.deque(
            maxlen=trace_limit
        )
        if SimulatedCluster.created is not None:
            SimulatedCluster.created.append(self)
        if dynamic:
            initial = VoterSet.of_nodes(
                VoterNode(node_id=i, directory_id=self.nodes[i].directory_id) for i in voters
            )
            for voter_id in voters:
                self.nodes[voter_id].snapshots.create(
                    OffsetAndEpoch(epoch=0, offset=0), bootstrap_checkpoint(initial)
                )

    # Scheduling.

    def schedule(self, delay: float, action: Callable[[], None]) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, _Scheduled(self.now + delay, self._sequence, action))

    def run_until(self, deadline: float, *, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to `deadline` (simulated seconds); True if `stop()` became true."""
        queue = self._queue
        while queue and queue[0].time <= deadline:
            item = heapq.heappop(queue)
            self.now = item.time
            item.action()
            if stop is not None and stop():
                return True
        self.now = max(self.now, deadline)
        return stop() if stop is not None else False

    def run_for(self, duration: float, *, stop: Callable[[], bool] | None = None) -> bool:
        return self.run_until(self.now + duration, stop=stop)

    def note(self, text: str) -> None:
        self.trace.append((self.now, None, text))

    def format_trace(self, last: int = 80) -> str:
        lines = []
        for now, node_id, what in list(self.trace)[-last:]:
            where = f"node {node_id}: " if node_id is not None else ""
            lines.append(f"{now:10.4f} {where}{what}")
        return "\n".join(lines)

    # Nodes.

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.incarnation += 1
        node.alive = True
        node.flushing = False
        node.tick_at = None
        node.applied = []
        node.applied_offset = 0
        latest = node.snapshots.latest_snapshot_id()
        if latest is not None:  # the state machine starts from its newest snapshot
            node.applied = decode_snapshot(node.snapshots.load(latest))
            node.applied_offset = latest.offset
        node.high_watermark = node.disk.log_start.offset
        # Every node knows its directory id (meta.properties); static voters are configured
        # with their endpoints (controller.quorum.voters), which the kraft.version upgrade
        # writes into the log.
        extra: dict[str, object] = {"directory_id": node.directory_id}
        if self.dynamic:
            extra["bootstrap_ids"] = self.bootstrap
        else:
            extra["voter_endpoints"] = {i: static_endpoints(i) for i in self.voters}
        node.raft = self.node_factory(
            node_id=node_id,
            voters=() if self.dynamic else self.voters,
            config=self.config,
            rng=random.Random(self.random.getrandbits(64)),
            cluster_id="simulated",
            log=node.disk,
            snapshots=node.snapshots,
            **extra,
        )
        self.note(f"start {node_id} (incarnation {node.incarnation})")
        self.checker.node_started(node)
        self.step(
            node,
            Start(
                election_state=node.store.read(),
                log_end_offset=node.disk.end_offset,
                last_epoch=node.disk.last_epoch,
            ),
        )

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.alive:
            return
        node.alive = False
        node.raft = None
        node.disk.crash()
        node.snapshots.crash()
        self.note(f"crash {node_id}: log end {node.disk.end_offset}")
        self.checker.node_crashed(node)

    def replace_disk(self, node_id: int, directory_id: str) -> None:
        """The node's disk is replaced (it is down): an empty metadata log in a directory with
        a new id, as `storage format --no-initial-controllers` leaves it."""
        node = self.nodes[node_id]
        assert not node.alive
        node.disk = MemoryReplicatedLog()
        node.store = MemoryQuorumStateStore()
        node.snapshots = MemorySnapshotStore()
        node.directory_id = directory_id
        self.note(f"disk of node {node_id} replaced (directory {directory_id})")

    def resign(self, node_id: int) -> None:
        """A graceful shutdown begins on `node_id`."""
        self.step(self.nodes[node_id], Resign())

    def step(self, node: SimulatedNode, event: RaftEvent) -> None:
        raft = node.raft
        assert raft is not None
        self.steps += 1
        self.trace.append((self.now, node.node_id, event))
        actions = raft.step(event, self.now)
        self._execute(node, actions)
        self.checker.after_step(node, event, actions)
        self._schedule_tick(node)

    def _schedule_tick(self, node: SimulatedNode) -> None:
        raft = node.raft
        if raft is None:
            return
        deadline = raft.next_deadline()
        if deadline is None or (node.tick_at is not None and node.tick_at <= deadline):
            return
        node.tick_at = deadline
        incarnation = node.incarnation

        def tick() -> None:
            if node.incarnation != incarnation or not node.alive or node.tick_at != deadline:
                return
            node.tick_at = None
            self.step(node, Tick())

        self.schedule(max(0.0, deadline - self.now), tick)

    def _execute(self, node: SimulatedNode, actions: list[RaftAction]) -> None:
        for action in actions:
            match action:
                case PersistElectionState():
                    self.checker.before_persist(node, action.state)
                    node.store.write(action.state)
                case AppendToLog():
                    node.disk.append(action.entry)
                case TruncateLog():
                    self.checker.before_truncate(node, action.offset)
                    node.disk.truncate_to(action.offset)
                case WriteSnapshotChunk():
                    node.snapshots.write_chunk(action.snapshot_id, action.position, action.data)
                case InstallSnapshot():
                    self.snapshots_installed += 1
                    node.snapshots.complete(action.snapshot_id)
                    node.disk.truncate_to_snapshot(action.snapshot_id)
                    contents = node.snapshots.load(action.snapshot_id)
                    self.checker.on_install(node, action.snapshot_id, decode_snapshot(contents))
                case FlushLog():
                    self._start_flush(node)
                case CommitUpTo():
                    self.checker.on_commit(node, action.high_watermark)
                case LeaderChanged():
                    node.leader_changes.append((action.leader_id, action.epoch))
                case Send():
                    self.checker.before_send(node, action)
                    self._send(node.node_id, action.destination_id, action.message)
                case Refused():
                    self.refused[action.kind] += 1

    # The disk: a flush takes time, and covers what was appended before it began.

    def _start_flush(self, node: SimulatedNode) -> None:
        if node.flushing:
            return
        node.flushing = True
        incarnation = node.incarnation
        up_to = node.disk.end_offset

        def done() -> None:
            if node.incarnation != incarnation or not node.alive:
                return
            node.flushing = False
            node.disk.flush_up_to(up_to)
            self.step(node, LogFlushed(flushed_offset=node.disk.flushed_offset))
            if node.alive and node.disk.flushed_offset < node.disk.end_offset:
                self._start_flush(node)

        self.schedule(self.random.uniform(self.disk.min_flush, self.disk.max_flush), done)

    # The network.

    def _send(self, source_id: int, destination_id: int, message: RaftMessage) -> None:
        self.sent[source_id, type(message).__name__] += 1
        destination = self.nodes.get(destination_id)
        if destination is None:
            return
        if isinstance(message, REQUEST_TYPES):
            incarnation = destination.incarnation
        else:
            key = (source_id, destination_id, message.correlation_id)
            incarnation = self._reply_incarnation.pop(key, destination.incarnation)
        copies = 1
        conditions = self.network
        if self.random.random() < conditions.duplication:
            copies = 2
        for _ in range(copies):
            if (source_id, destination_id) in self.cut_links:
                continue
            if self.random.random() < conditions.loss:
                continue
            delay = self.random.uniform(conditions.min_delay, conditions.max_delay)
            self.schedule(delay, self._delivery(source_id, destination, incarnation, message))

    def _delivery(
        self,
        source_id: int,
        destination: SimulatedNode,
        incarnation: int,
        message: RaftMessage,
    ) -> Callable[[], None]:
        def deliver() -> None:
            if (
                not destination.alive
                or destination.incarnation != incarnation
                or (source_id, destination.node_id) in self.cut_links
            ):
                return
            if isinstance(message, REQUEST_TYPES):
                # The answer goes back on the connection the request came in on.
                source = self.nodes[source_id]
                key = (destination.node_id, source_id, message.correlation_id)
                self._reply_incarnation[key] = source.incarnation
                if len(self._reply_incarnation) > 50_000:
                    # Forget the oldest: their answers were lost long ago.
                    del self._reply_incarnation[next(iter(self._reply_incarnation))]
            self.delivering = message
            try:
                self.step(destination, Receive(source_id=source_id, message=message))
            finally:
                self.delivering = None

        return deliver

    def inject(self, source_id: int, destination_id: int, message: RaftRequest) -> None:
        """A request forged by someone on the network in the name of `source_id` (a node of
        the cluster or not), delivered now; its answer goes to `source_id` like any other."""
        destination = self.nodes[destination_id]
        if not destination.alive:
            return
        self.forged += 1
        self.trace.append((self.now, destination_id, f"forged, from {source_id}: {message}"))
        self.delivering = message
        try:
            self.step(destination, Receive(source_id=source_id, message=message))
        finally:
            self.delivering = None

    def cut(self, source_id: int, destination_id: int) -> None:
        self.cut_links.add((source_id, destination_id))

    def isolate(self, node_id: int) -> None:
        for other in self.nodes:
            if other != node_id:
                self.cut(node_id, other)
                self.cut(other, node_id)

    def partition(self, *groups: tuple[int, ...]) -> None:
        """Cut every link between nodes of different groups."""
        group_of = {n: i for i, group in enumerate(groups) for n in group}
        for a in self.nodes:
            for b in self.nodes:
                if a != b and group_of.get(a) != group_of.get(b):
                    self.cut(a, b)

    def heal(self) -> None:
        self.cut_links.clear()

    def take_snapshot(self, node_id: int) -> OffsetAndEpoch | None:
        """The node's state machine snapshots what it applied; its log drops what that covers
        (as `RaftDriver.create_snapshot` does)."""
        node = self.nodes[node_id]
        if not node.alive or not node.applied or node.applied_offset <= node.disk.log_start.offset:
            return None
        snapshot_id = OffsetAndEpoch(epoch=node.applied[-1].epoch, offset=node.applied_offset)
        raft = node.raft
        assert raft is not None
        header = b""
        if raft.kraft_version_at(snapshot_id.offset - 1) >= KRAFT_VERSION_DYNAMIC:
            offset = snapshot_id.offset - 1
            header = snapshot_header(raft.kraft_version_at(offset), raft.voter_set_at(offset))
        node.snapshots.create(snapshot_id, header + encode_snapshot(node.applied))
        node.disk.delete_before_snapshot(snapshot_id)
        self.note(f"snapshot of node {node_id} at {snapshot_id}")
        return snapshot_id

    # Clients and questions.

    def client_append(self, node_id: int | None = None) -> tuple[int, int, int] | None:
        """Offer a fresh record to `node_id` (default: the current leader, if any); returns
        (node id, epoch, offset) if it was accepted."""
        if node_id is None:
            node_id = self.leader_id()
            if node_id is None:
                return None
        node = self.nodes[node_id]
        if not node.alive or node.raft is None:
            return None
        self._client_counter += 1
        record = b"client-%d" % self._client_counter
        try:
            actions_before = node.raft.log_end_offset
            self.step(node, ClientAppend(records=(record,)))
        except NotLeaderError:
            return None
        return node_id, node.raft.epoch, actions_before

    def change_voters(self, change: AddVoter | RemoveVoter) -> bool:
        """Offer a voter change to the current leader; True if it appended it."""
        leader_id = self.leader_id()
        if leader_id is None:
            return False
        node = self.nodes[leader_id]
        try:
            self.step(node, change)
        except (NotLeaderError, KafkaError) as refusal:
            self.note(f"voter change {change} refused: {refusal}")
            return False
        self.note(f"voter change {change} appended by {leader_id}")
        return True

    def upgrade_kraft_version(self, *, validate_only: bool = False) -> bool:
        """Offer the kraft.version upgrade to the current leader; True if it took it (appended
        the entry, or found the version in its log already)."""
        leader_id = self.leader_id()
        if leader_id is None:
            return False
        event = UpgradeKRaftVersion(version=KRAFT_VERSION_DYNAMIC, validate_only=validate_only)
        try:
            self.step(self.nodes[leader_id], event)
        except (NotLeaderError, KafkaError) as refusal:
            self.note(f"kraft.version upgrade refused: {refusal}")
            return False
        self.note(f"kraft.version upgrade taken by {leader_id}")
        return True

    def add_voter(self, node_id: int) -> bool:
        node = self.nodes[node_id]
        return self.change_voters(
            AddVoter(voter=VoterNode(node_id=node_id, directory_id=node.directory_id))
        )

    def remove_voter(self, node_id: int) -> bool:
        node = self.nodes[node_id]
        return self.change_voters(RemoveVoter(voter_id=node_id, directory_id=node.directory_id))

    def leader_id(self) -> int | None:
        """The leader of the highest epoch among live nodes, if some live node leads it."""
        best: tuple[int, int] | None = None
        for node in self.nodes.values():
            raft = node.raft
            if (
                node.alive
                and raft is not None
                and raft.role is Role.LEADER
                and (best is None or raft.epoch > best[0])
            ):
                best = (raft.epoch, node.node_id)
        return best[1] if best else None

    def live_nodes(self) -> list[SimulatedNode]:
        return [n for n in self.nodes.values() if n.alive]

    def describe_state(self) -> str:
        lines = []
        for node in self.nodes.values():
            raft = node.raft
            if raft is None:
                lines.append(f"  node {node.node_id}: down, log end {node.disk.end_offset}")
                continue
            lines.append(
                f"  node {node.node_id}: {raft.role.value} epoch {raft.epoch} leader "
                f"{raft.leader_id} voted {raft.voted_id} log end {raft.log_end_offset} "
                f"(last epoch {raft.last_epoch}, flushed {raft.flushed_offset}) hw "
                f"{raft.high_watermark}"
            )
        return "\n".join(lines)


def static_endpoints(node_id: int) -> tuple[Endpoint, ...]:
    """Where a simulated static voter listens, as controller.quorum.voters names it."""
    return (Endpoint(name="CONTROLLER", host=f"node-{node_id}", port=9093),)


def encode_snapshot(entries: list[LogEntry]) -> bytes:
    """The simulated state machine's snapshot: every entry it applied."""
    return repr([(e.base_offset, e.epoch, e.records, e.is_control) for e in entries]).encode()


def decode_snapshot(contents: bytes) -> list[LogEntry]:
    _, contents = split_snapshot(contents)
    if not contents:
        return []  # a bootstrap checkpoint
    return [
        LogEntry(base_offset=offset, epoch=epoch, records=records, is_control=control)
        for offset, epoch, records, control in ast.literal_eval(contents.decode())
    ]
