"""What a Raft quorum promises, checked after every step of a simulation.

Safety (any breach raises `InvariantViolation` at once):
- election safety: at most one leader per epoch;
- one vote per voter per epoch, and durable before the response that grants it is sent;
- a committed entry is never lost or changed: every entry any node ever reported committed is
  kept in a registry; each node's committed entries must match it, and a new leader's log must
  hold all of it (leader completeness);
- log matching up to the high watermark: each node's entries below its high watermark are the
  registry's (checked as it reports them), and nothing below it is truncated or replaced by a
  snapshot afterwards, so all logs agree up to each one's high watermark;
- a node's high watermark never goes backwards (a restart starts it again from its snapshot or
  zero) and never passes its log end;
- the node and its log agree on the log end and last epoch; no timer is left in the past;
- dynamic voters (KIP-853): each committed voter set differs from the previous committed one
  by one voter at most (the first one a static quorum commits, by its kraft.version upgrade,
  names the static voters), and a leader's log holds one uncommitted voter change at most.

Liveness (`assert_converged`, at the end of a run): every live node has applied every
committed entry, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.raft.control_records import control_changes
from moldau.raft.events import (
    AddVoter,
    RaftAction,
    RaftEvent,
    RemoveVoter,
    Send,
    UpgradeKRaftVersion,
)
from moldau.raft.log import LogEntry, OffsetAndEpoch
from moldau.raft.messages import VoteRequest, VoteResponse
from moldau.raft.node import Role
from moldau.raft.quorum_state import ElectionState
from moldau.raft.voter_set import VoterSet

if TYPE_CHECKING:
    from tests.simulation.cluster import SimulatedCluster, SimulatedNode


class InvariantViolation(AssertionError):
    pass


class InvariantChecker:
    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.committed: list[LogEntry] = []  # the registry, in offset order
        self.committed_index: dict[int, int] = {}  # base offset -> index in `committed`
        self.leaders: dict[int, int] = {}  # epoch -> the node that led it
        self.votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> candidate
        self.checked_leaders: set[tuple[int, int, int]] = set()  # (node, incarnation, epoch)
        # The last voter set committed; a static quorum's from the start, so the voters its
        # kraft.version upgrade writes must be the same ones.
        self.committed_voters: VoterSet | None = (
            None if cluster.dynamic else VoterSet.of(cluster.voters)
        )

    @property
    def committed_end(self) -> int:
        return self.committed[-1].next_offset if self.committed else 0

    def fail(self, text: str) -> None:
        self.cluster.note(f"VIOLATION {text}")
        raise InvariantViolation(text)

    # Hooks called by the cluster.

    def node_started(self, node: SimulatedNode) -> None:
        pass

    def node_crashed(self, node: SimulatedNode) -> None:
        pass

    def before_persist(self, node: SimulatedNode, state: ElectionState) -> None:
        previous = node.store.state
        if previous is not None and state.epoch < previous.epoch:
            self.fail(f"node {node.node_id} persisted epoch {state.epoch} after {previous.epoch}")
        if state.voted_id is not None:
            key = (node.node_id, state.epoch)
            earlier = self.votes.setdefault(key, state.voted_id)
            if earlier != state.voted_id:
                self.fail(
                    f"node {node.node_id} voted for {earlier} and then {state.voted_id} "
                    f"in epoch {state.epoch}"
                )

    def before_send(self, node: SimulatedNode, send: Send) -> None:
        message = send.message
        request = self.cluster.delivering
        if not (
            isinstance(message, VoteResponse)
            and message.vote_granted
            and isinstance(request, VoteRequest)
            and request.correlation_id == message.correlation_id
            and not request.pre_vote
        ):
            return
        candidate, epoch = request.replica_id, message.leader_epoch
        durable = node.store.state
        if durable is None or durable.epoch != epoch or durable.voted_id != candidate:
            self.fail(
                f"node {node.node_id} granted its vote in epoch {epoch} to {candidate} "
                f"before persisting it (durable: {durable})"
            )
        earlier = self.votes.setdefault((node.node_id, epoch), candidate)
        if earlier != candidate:
            self.fail(
                f"node {node.node_id} granted votes to {earlier} and {candidate} in epoch {epoch}"
            )

    def before_truncate(self, node: SimulatedNode, offset: int) -> None:
        if offset < node.high_watermark:
            self.fail(
                f"node {node.node_id} truncates to {offset}, below its high watermark "
                f"{node.high_watermark}"
            )

    def on_commit(self, node: SimulatedNode, high_watermark: int) -> None:
        if high_watermark < node.high_watermark:
            self.fail(
                f"node {node.node_id}'s high watermark went back from {node.high_watermark} "
                f"to {high_watermark}"
            )
        if high_watermark > node.disk.end_offset:
            self.fail(
                f"node {node.node_id} commits up to {high_watermark}, past its log end "
                f"{node.disk.end_offset}"
            )
        node.high_watermark = high_watermark
        for entry in node.disk.read(node.applied_offset):
            if entry.last_offset >= high_watermark:
                break
            self._register(node, entry)
            node.applied.append(entry)
            node.applied_offset = entry.next_offset

    def on_install(
        self, node: SimulatedNode, snapshot_id: OffsetAndEpoch, entries: list[LogEntry]
    ) -> None:
        """A follower installed the leader's snapshot: its state is now that snapshot's."""
        if snapshot_id.offset < node.high_watermark:
            self.fail(
                f"node {node.node_id} installed snapshot {snapshot_id} below its high "
                f"watermark {node.high_watermark}"
            )
        end = entries[-1].next_offset if entries else 0
        if end != snapshot_id.offset or (entries and entries[-1].epoch != snapshot_id.epoch):
            self.fail(f"snapshot {snapshot_id} holds entries up to {end}")
        for entry in entries:
            self._register(node, entry)
        node.applied = list(entries)
        node.applied_offset = snapshot_id.offset
        node.high_watermark = snapshot_id.offset

    def _register(self, node: SimulatedNode, entry: LogEntry) -> None:
        index = self.committed_index.get(entry.base_offset)
        if index is None:
            if entry.base_offset != self.committed_end:
                self.fail(
                    f"node {node.node_id} committed an entry at {entry.base_offset} that does "
                    f"not line up with the committed log ending at {self.committed_end}"
                )
            self.committed_index[entry.base_offset] = len(self.committed)
            self.committed.append(entry)
            if entry.is_control:
                self._check_voter_change(node, entry)
            return
        if self.committed[index] != entry:
            self.fail(
                f"node {node.node_id} committed {entry} where {self.committed[index]} "
                "was committed before"
            )

    def _check_voter_change(self, node: SimulatedNode, entry: LogEntry) -> None:
        """Voters change one at a time: each committed voter set differs from the one
        committed before it by one voter at most (so their majorities overlap)."""
        voters = control_changes(entry.records).voters
        if voters is None:
            return
        previous = self.committed_voters
        self.committed_voters = voters
        if previous is None:
            return
        changed = set(previous.voter_ids) ^ set(voters.voter_ids)
        if len(changed) > 1:
            self.fail(
                f"node {node.node_id} committed voters {voters.voter_ids} right after "
                f"{previous.voter_ids}: more than one voter changed at once"
            )

    def _check_pending_voter_changes(self, node: SimulatedNode) -> None:
        """A leader's log holds one uncommitted voter change at most."""
        raft = node.raft
        assert raft is not None
        pending = [
            entry
            for entry in node.disk.read(raft.high_watermark)
            if entry.is_control
            and entry.base_offset >= raft.high_watermark
            and control_changes(entry.records).voters is not None
        ]
        if len(pending) > 1:
            self.fail(f"leader {node.node_id} has {len(pending)} uncommitted voter changes")

    def after_step(self, node: SimulatedNode, event: RaftEvent, actions: list[RaftAction]) -> None:
        raft = node.raft
        if raft is None:
            return
        if isinstance(event, AddVoter | RemoveVoter | UpgradeKRaftVersion):
            self._check_pending_voter_changes(node)
        if raft.role is Role.LEADER:
            leader = self.leaders.setdefault(raft.epoch, node.node_id)
            if leader != node.node_id:
                self.fail(f"nodes {leader} and {node.node_id} both led epoch {raft.epoch}")
            key = (node.node_id, node.incarnation, raft.epoch)
            if key not in self.checked_leaders:
                self.checked_leaders.add(key)
                self._check_leader_completeness(node)
        if raft.log_end_offset != node.disk.end_offset or raft.last_epoch != node.disk.last_epoch:
            self.fail(
                f"node {node.node_id} believes its log ends at {raft.log_end_offset} "
                f"(epoch {raft.last_epoch}), the log says {node.disk.end_offset} "
                f"(epoch {node.disk.last_epoch})"
            )
        if raft.high_watermark != node.high_watermark:
            self.fail(
                f"node {node.node_id}'s high watermark {raft.high_watermark} was not reported "
                f"(last CommitUpTo: {node.high_watermark})"
            )
        deadline = raft.next_deadline()
        if deadline is not None and deadline <= self.cluster.now:
            self.fail(f"node {node.node_id} left a timer in the past ({deadline})")

    def _check_leader_completeness(self, node: SimulatedNode) -> None:
        """Every committed entry is in the new leader's log, or in the snapshot it starts from
        (which holds what its state machine applied, each checked then)."""
        start = node.disk.log_start.offset
        if start > node.applied_offset:
            self.fail(f"node {node.node_id}'s log starts at {start}, past what it applied")
        entries = list(node.disk.read(start))
        first = self.committed_index.get(start, len(self.committed))
        for index, committed in enumerate(self.committed[first:]):
            if index >= len(entries) or entries[index] != committed:
                self.fail(
                    f"node {node.node_id} leads without the committed entry {committed} "
                    f"(its log has {entries[index] if index < len(entries) else 'nothing'})"
                )

    # Liveness.

    def assert_converged(self) -> None:
        for node in self.cluster.live_nodes():
            if node.applied_offset != self.committed_end:
                self.fail(
                    f"node {node.node_id} applied up to {node.applied_offset}, the quorum "
                    f"committed up to {self.committed_end}"
                )
            if node.applied != self.committed:
                self.fail(f"node {node.node_id} applied other entries than were committed")
