"""The Raft state machine of one node, sans I/O: `RaftNode.step(event, now) -> actions` (KIP-595,
KIP-996 pre-vote, check-quorum), as Kafka's KafkaRaftClient and QuorumState.

Roles and transitions (Kafka's names; e is the epoch, L a leader):

    unattached(e)  --election timeout------------------------> prospective(e)
    follower(e, L) --fetch timeout, or L's EndQuorumEpoch----> prospective(e)
    prospective(e) --majority of pre-votes-------------------> candidate(e+1, voted for itself)
    prospective(e) --pre-votes lost, or election timeout-----> follower(e, L) if L known, else
                                                               unattached(e)
    candidate(e)   --majority of votes-----------------------> leader(e)   (one voter: at once)
    candidate(e)   --votes lost or timeout, then a backoff---> prospective(e)
    leader(e)      --Resign, or no fetch from a majority-----> resigned(e)
                     within 1.5 x the fetch timeout (check-quorum)
    resigned(e)    --election timeout (not when shutting down)--> unattached(e+1)
    any(e)         --learns of epoch e' > e------------------> follower(e', L) if L known, else
                                                               unattached(e')
    unattached, prospective, candidate(e) --learns L leads e--> follower(e, L)

A restarted node resumes from its quorum-state file: as a follower of the leader it knew, as
unattached (with its vote) otherwise, and resigned if it led that epoch. A node that is not a
voter is an observer: only ever unattached or a follower, it fetches (from the leader when it
knows it, from any voter otherwise) and never stands. It still answers a candidate that counts
it as a voter, on the logs (its log may not hold the change that made it one yet, KIP-853).

Invariants:
- the election state (epoch, vote, leader) is persisted (`PersistElectionState`) before any
  action that depends on it: a vote is durable before the response granting it leaves, so a
  restarted voter never votes twice in one epoch; a pre-vote changes and persists nothing;
- a leader starts its epoch with a control entry (a leader change); the high watermark only
  advances past offsets durable on a majority of voters, and only once that entry is, so entries
  of earlier epochs commit together with it (Raft's "commit only your own epoch" rule);
- a follower fetches only from an offset it has flushed, so the leader may count it as durable;
- the high watermark never goes backwards, on a follower never past the leader's nor its own
  log end, and a follower never truncates below it; `CommitUpTo(o)` means every offset below o
  is committed.

Elections are in `voting.py`, fetching in `replication.py`, the shared state and transitions in
`node_state.py`; this module steps events, runs the timers and sends what each role sends.
"""

from __future__ import annotations

from moldau.raft.description import QuorumDescription, ReplicaState, VoterState
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
    UpdateVoter,
    UpgradeKRaftVersion,
    WriteSnapshotChunk,
)
from moldau.raft.leader_state import ReplicaProgress
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    RaftRequest,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.node_state import (
    LAST_EPOCH,
    NotLeaderError,
    RaftSafetyError,
    Role,
    leader_change_payload,
)
from moldau.raft.reconfiguration import ReconfigurationMixin
from moldau.raft.replication import ReplicationMixin
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC
from moldau.raft.voting import VotingMixin

__all__ = [
    "LAST_EPOCH",
    "AddVoter",
    "AppendToLog",
    "ClientAppend",
    "CommitUpTo",
    "FlushLog",
    "InstallSnapshot",
    "LeaderChanged",
    "LogFlushed",
    "NotLeaderError",
    "PersistElectionState",
    "QuorumDescription",
    "RaftAction",
    "RaftEvent",
    "RaftNode",
    "RaftSafetyError",
    "Receive",
    "Refused",
    "RemoveVoter",
    "ReplicaState",
    "Resign",
    "Role",
    "Send",
    "Start",
    "Tick",
    "TruncateLog",
    "UpdateVoter",
    "UpgradeKRaftVersion",
    "VoterState",
    "WriteSnapshotChunk",
    "leader_change_payload",
]

# A transition may start a timer that has already expired (a zero backoff): look again, a few
# times at most.
_TIMER_PASSES = 8


class RaftNode(VotingMixin, ReplicationMixin, ReconfigurationMixin):
    """One node's Raft state; all I/O happens in the driver that executes the returned actions.

    `log` is read, never written (the driver appends and truncates as told): a node in a quorum
    of several voters needs it to answer fetches and find where logs diverge. `rng` draws the
    election timeouts and backoffs: seed it for a reproducible run."""

    def step(self, event: RaftEvent, now: float) -> list[RaftAction]:
        actions: list[RaftAction] = []
        if self._snapshot_voters_pending:
            self._read_installed_snapshot_voters(now, actions)
        match event:
            case Start():
                self._on_start(event, now, actions)
            case ClientAppend():
                if self.role is not Role.LEADER:
                    raise NotLeaderError(self.leader_id, self.epoch)
                self._append_as_leader(event.records, actions)
            case AddVoter():
                self._add_voter(event, now, actions)
            case RemoveVoter():
                self._remove_voter(event, now, actions)
            case UpdateVoter():
                self._update_voter(event, now, actions)
            case UpgradeKRaftVersion():
                self._upgrade_kraft_version(event, now, actions)
            case LogFlushed():
                self._on_log_flushed(event, now, actions)
            case Tick():
                pass
            case Resign():
                self._shutting_down = True
                if self.role is Role.LEADER and self._leader is not None:
                    self._become_resigned(now, actions, successors=self._leader.successors())
            case Receive():
                if self._started:
                    self._on_receive(event.source_id, event.message, now, actions)
        if self._started:
            self._poll(now, actions)
        return actions

    def next_deadline(self) -> float | None:
        """When the node next wants a `Tick` (the `now` of its steps), or None: no timer runs."""
        deadlines = [self._requests.next_deadline(), self._role_deadline()]
        leader = self._leader
        if leader is not None and self.role is Role.LEADER:
            deadlines.append(leader.check_quorum_deadline)
            deadlines.extend(p.deadline for p in leader.parked.values())
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def _role_deadline(self) -> float | None:
        match self.role:
            case Role.UNATTACHED:
                return self._election_deadline if self._may_stand() else None
            case Role.RESIGNED:
                return None if self._shutting_down else self._election_deadline
            case Role.PROSPECTIVE:
                return self._election_deadline
            case Role.CANDIDATE:
                if self._backoff_deadline is not None:
                    return self._backoff_deadline
                return self._election_deadline
            case Role.FOLLOWER:
                return self._fetch_deadline if self._may_stand() or not self.is_voter else None
            case Role.LEADER:
                return None

    def _on_start(self, event: Start, now: float, actions: list[RaftAction]) -> None:
        if self._started:
            raise RuntimeError("the node has started already")
        self._started = True
        self.log_end_offset = self.flushed_offset = event.log_end_offset
        self.last_epoch = event.last_epoch
        if self._log is not None:
            # What the log starts after is in a snapshot: committed.
            self.high_watermark = self._log.log_start.offset
        stored = event.election_state
        self._persisted = stored
        stored_epoch = stored.epoch if stored else 0
        self._load_voter_history()
        if self.voters == (self.node_id,) and self.is_voter:
            # A single voter is a majority of one: it votes for itself and leads at once.
            self.epoch = max(stored_epoch, event.last_epoch)
            self._become_candidate(now, actions)
            return
        if self._log is None:
            raise ValueError("a node in a quorum of several voters needs its log (log=)")
        static = self.kraft_version < KRAFT_VERSION_DYNAMIC
        if (
            static
            and stored is not None
            and stored.voters
            and set(stored.voters) != set(self.voters)
        ):
            raise ValueError(
                f"the voters in the quorum-state file {stored.voters} differ from the "
                f"configured {self.voters}: fix controller.quorum.voters or remove the file"
            )
        self.epoch = stored_epoch
        if stored is None or stored_epoch < event.last_epoch:
            self._become_unattached(max(stored_epoch, event.last_epoch), now, actions)
        elif stored.leader_id == self.node_id:
            # It led this epoch before the restart: resigned, so it neither votes again in the
            # epoch nor reuses offsets that lost, unflushed entries of the epoch had.
            self.leader_id, self.voted_id = self.node_id, stored.voted_id
            self._notified = (self.node_id, self.epoch)
            self._become_resigned(now, actions, successors=())
        elif stored.leader_id is not None:
            self.voted_id = stored.voted_id
            self._become_follower(stored_epoch, stored.leader_id, now, actions)
        else:
            self._become_unattached(stored_epoch, now, actions, voted_id=stored.voted_id)

    def _read_installed_snapshot_voters(self, now: float, actions: list[RaftAction]) -> None:
        """The snapshot installed in the last step is in the store now: its header names the
        voters from its end offset on."""
        self._snapshot_voters_pending = False
        before = self.voter_set
        self._load_voter_history()
        if self.voter_set != before:
            self._on_voters_changed(now, actions)

    def _on_log_flushed(self, event: LogFlushed, now: float, actions: list[RaftAction]) -> None:
        flushed = max(self.flushed_offset, event.flushed_offset)
        self.flushed_offset = min(flushed, self.log_end_offset)
        if self._leader is not None:
            self._leader.update_local_end(self.flushed_offset, now)
            self._advance_high_watermark(now, actions)
            self._complete_parked_fetches(now, actions)

    # Timers and outbound requests: every step ends here (Kafka's poll).

    def _poll(self, now: float, actions: list[RaftAction]) -> None:
        self._requests.expire(now)
        for _ in range(_TIMER_PASSES):
            if not self._expire_role_timer(now, actions):
                break
        if self._leader is not None and self.role is Role.LEADER:
            self._complete_parked_fetches(now, actions)
            self._leader.forget_idle_observers(now)
        self._send_requests(now, actions)

    def _expire_role_timer(self, now: float, actions: list[RaftAction]) -> bool:
        """Act on the role's expired timer; True if that changed the role or its timers."""
        match self.role:
            case Role.UNATTACHED:
                if self._may_stand() and _expired(self._election_deadline, now):
                    self._become_prospective(now, actions)
                    return True
            case Role.PROSPECTIVE:
                if _expired(self._election_deadline, now):
                    self._prospective_lost(now, actions)
                    return True
            case Role.CANDIDATE:
                if self._backoff_deadline is not None:
                    if self._backoff_deadline <= now:
                        self._become_prospective(now, actions)
                        return True
                elif _expired(self._election_deadline, now):
                    self._start_backoff(now)
                    return True
            case Role.FOLLOWER:
                if _expired(self._fetch_deadline, now):
                    if self._may_stand():
                        self._become_prospective(now, actions)
                        return True
                    if not self.is_voter:
                        # An observer whose leader went quiet asks the voters (or the
                        # bootstrap servers) who leads now.
                        candidates = self.fetch_candidates()
                        if candidates:
                            self._fetch_target = self._random.choice(candidates)
                        self._fetch_deadline = now + self.config.fetch_timeout_ms / 1000
                        return True
            case Role.LEADER:
                leader = self._leader
                if leader is not None and _expired(leader.check_quorum_deadline, now):
                    self._become_resigned(now, actions, successors=leader.successors())
                    return True
            case Role.RESIGNED:
                # (a leader removed from the voters moves on too, as an observer)
                if not self._shutting_down and _expired(self._election_deadline, now):
                    self._become_unattached(self.epoch + 1, now, actions)
                    return True
        return False

    def _send_requests(self, now: float, actions: list[RaftAction]) -> None:
        match self.role:
            case Role.PROSPECTIVE | Role.CANDIDATE:
                if self._tally is not None and self._backoff_deadline is None:
                    for voter_id in self._tally.unrecorded_voters():
                        self._send_request(voter_id, self._vote_request, now, actions)
            case Role.LEADER:
                if self._leader is not None:
                    for voter_id in sorted(self._leader.unacknowledged_voters):
                        self._send_request(voter_id, self._begin_quorum_epoch_request, now, actions)
            case Role.RESIGNED:
                for voter_id in sorted(self._unacknowledged_resignation):
                    self._send_request(voter_id, self._end_quorum_epoch_request, now, actions)
            case Role.FOLLOWER | Role.UNATTACHED:
                self._maybe_send_fetch(now, actions)

    # Messages in.

    def _on_receive(
        self, source_id: int, message: RaftMessage, now: float, actions: list[RaftAction]
    ) -> None:
        reply: RaftMessage | None = None
        match message:
            case VoteRequest():
                reply = self._handle_vote_request(message, now, actions)
            case BeginQuorumEpochRequest():
                reply = self._handle_begin_quorum_epoch_request(message, now, actions)
            case EndQuorumEpochRequest():
                reply = self._handle_end_quorum_epoch_request(message, now, actions)
            case FetchRequest():
                reply = self._handle_fetch_request(source_id, message, now, actions)
            case FetchSnapshotRequest():
                reply = self._handle_fetch_snapshot_request(source_id, message, now, actions)
            case _:
                request = self._requests.take(source_id, message.correlation_id)
                if request is not None:
                    self._on_response(source_id, request, message, now, actions)
        if reply is not None:
            actions.append(Send(destination_id=source_id, message=reply))

    def _on_response(
        self,
        source_id: int,
        request: RaftRequest,
        response: RaftMessage,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        match request, response:
            case VoteRequest(), VoteResponse():
                self._handle_vote_response(source_id, request, response, now, actions)
            case BeginQuorumEpochRequest(), BeginQuorumEpochResponse():
                self._handle_begin_quorum_epoch_response(source_id, request, response, now, actions)
            case EndQuorumEpochRequest(), EndQuorumEpochResponse():
                self._handle_end_quorum_epoch_response(source_id, request, response, now, actions)
            case FetchRequest(), FetchResponse():
                self._handle_fetch_response(source_id, request, response, now, actions)
            case FetchSnapshotRequest(), FetchSnapshotResponse():
                self._handle_fetch_snapshot_response(source_id, request, response, now, actions)
            case _:
                self._requests.back_off(source_id, now)  # an answer to another question

    # Describing.

    def describe(self) -> QuorumDescription:
        """The quorum as this node sees it; replica progress is known only on the leader."""
        leader = self._leader
        voters = leader.voter_progress if leader is not None else {}
        observers = leader.observer_progress if leader is not None else {}
        return QuorumDescription(
            node_id=self.node_id,
            role=self.role,
            leader_id=self.leader_id,
            epoch=self.epoch,
            high_watermark=self.high_watermark,
            voters=tuple(
                _replica_state(v.node_id, voters.get(v.node_id), v.directory_id)
                for v in self.voter_set
            ),
            observers=tuple(_replica_state(o, observers[o]) for o in sorted(observers)),
            voter_nodes=self.voter_set.nodes,
            kraft_version=self.kraft_version,
        )


def _replica_state(
    replica_id: int, progress: ReplicaProgress | None, directory_id: str | None = None
) -> ReplicaState:
    if progress is None:
        return ReplicaState(replica_id=replica_id, log_end_offset=-1, directory_id=directory_id)
    return ReplicaState(
        replica_id=replica_id,
        log_end_offset=progress.end_offset,
        last_fetch_time=progress.last_fetch_time,
        last_caught_up_time=progress.last_caught_up_time,
        directory_id=directory_id or progress.directory_id,
    )


def _expired(deadline: float | None, now: float) -> bool:
    return deadline is not None and deadline <= now
