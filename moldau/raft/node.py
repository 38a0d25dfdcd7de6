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

The node is composed of parts: its `QuorumState` (`quorum.py`: the epoch state of its role, one
object per role and epoch as `epoch_states.py` and `leader_state.py` define them, the
transitions, the voter set), and, each working on it, `Elections` (`voting.py`), `Replication`
(`replication.py`) and `Reconfiguration` (`reconfiguration.py`). This module steps events into
them, runs the timers and sends what each role sends.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Generic, TypeVar, cast, overload

from moldau.raft.description import QuorumDescription, ReplicaState, VoterState
from moldau.raft.epoch_states import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    Role,
    UnattachedState,
)
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
from moldau.raft.leader_state import LeaderState, ReplicaProgress, ResignedState
from moldau.raft.log import ReplicatedLog
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
from moldau.raft.quorum import (
    LAST_EPOCH,
    NotLeaderError,
    QuorumState,
    RaftSafetyError,
    leader_change_payload,
)
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.reconfiguration import Reconfiguration
from moldau.raft.replication import Replication
from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import Endpoint, VoterSet
from moldau.raft.voting import Elections

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

T = TypeVar("T")


class _OfQuorum(Generic[T]):
    """A read-only attribute of a `RaftNode` that is the same-named one of its `QuorumState`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, node: None, owner: type) -> _OfQuorum[T]: ...

    @overload
    def __get__(self, node: RaftNode, owner: type | None = None) -> T: ...

    def __get__(self, node: RaftNode | None, owner: type | None = None) -> T | _OfQuorum[T]:
        if node is None:
            return self
        return cast(T, getattr(node.quorum, self.name))

    def __set__(self, node: RaftNode, value: T) -> None:
        raise AttributeError(f"{self.name} is the quorum state's: the node's steps change it")


class RaftNode:
    """One node's Raft state; all I/O happens in the driver that executes the returned actions.

    `log` is read, never written (the driver appends and truncates as told): a node in a quorum
    of several voters needs it to answer fetches and find where logs diverge. `rng` draws the
    election timeouts and backoffs: seed it for a reproducible run.

    The node is its parts: the `QuorumState` (the role's epoch state, transitions, the voter
    set), and, working on it, `Elections`, `Replication` and `Reconfiguration`; the node steps
    events into them, runs the timers and sends what each role sends."""

    # The parts' classes: a subclass may name its own (the simulation plants bugs that way).
    quorum_class: type[QuorumState] = QuorumState
    elections_class: type[Elections] = Elections
    replication_class: type[Replication] = Replication
    reconfiguration_class: type[Reconfiguration] = Reconfiguration

    def __init__(
        self,
        *,
        node_id: int,
        voters: tuple[int, ...] = (),
        config: QuorumConfig | None = None,
        rng: random.Random | None = None,
        cluster_id: str | None = None,
        log: ReplicatedLog | None = None,
        snapshots: SnapshotStore | None = None,
        directory_id: str | None = None,
        bootstrap_ids: tuple[int, ...] = (),
        voter_endpoints: Mapping[int, tuple[Endpoint, ...]] | None = None,
    ) -> None:
        self.quorum = quorum = self.quorum_class(
            node_id=node_id,
            voters=voters,
            config=config,
            rng=rng,
            cluster_id=cluster_id,
            log=log,
            snapshots=snapshots,
            directory_id=directory_id,
            bootstrap_ids=bootstrap_ids,
            voter_endpoints=voter_endpoints,
        )
        self.elections = self.elections_class(quorum)
        self.replication = self.replication_class(quorum)
        self.reconfiguration = self.reconfiguration_class(quorum)
        self._started = False

    # What the node knows: its quorum state's, read-only.
    node_id: _OfQuorum[int] = _OfQuorum()
    directory_id: _OfQuorum[str | None] = _OfQuorum()
    config: _OfQuorum[QuorumConfig] = _OfQuorum()
    role: _OfQuorum[Role] = _OfQuorum()
    epoch: _OfQuorum[int] = _OfQuorum()
    leader_id: _OfQuorum[int | None] = _OfQuorum()
    voted_id: _OfQuorum[int | None] = _OfQuorum()
    is_leader: _OfQuorum[bool] = _OfQuorum()
    log_end_offset: _OfQuorum[int] = _OfQuorum()
    last_epoch: _OfQuorum[int] = _OfQuorum()
    flushed_offset: _OfQuorum[int] = _OfQuorum()
    high_watermark: _OfQuorum[int] = _OfQuorum()
    epoch_start_offset: _OfQuorum[int] = _OfQuorum()
    voter_set: _OfQuorum[VoterSet] = _OfQuorum()
    voters: _OfQuorum[tuple[int, ...]] = _OfQuorum()
    kraft_version: _OfQuorum[int] = _OfQuorum()
    is_voter: _OfQuorum[bool] = _OfQuorum()

    def voter_set_at(self, offset: int) -> VoterSet:
        return self.quorum.voter_set_at(offset)

    def kraft_version_at(self, offset: int) -> int:
        return self.quorum.kraft_version_at(offset)

    # Stepping.

    def step(self, event: RaftEvent, now: float) -> list[RaftAction]:
        actions: list[RaftAction] = []
        quorum = self.quorum
        if quorum.snapshot_voters_pending:
            quorum.read_installed_snapshot_voters(now, actions)
        match event:
            case Start():
                self._on_start(event, now, actions)
            case ClientAppend():
                if quorum.role is not Role.LEADER:
                    raise NotLeaderError(quorum.leader_id, quorum.epoch)
                quorum.append_as_leader(event.records, actions)
            case AddVoter():
                self.reconfiguration.add_voter(event, now, actions)
            case RemoveVoter():
                self.reconfiguration.remove_voter(event, now, actions)
            case UpdateVoter():
                self.reconfiguration.update_voter(event, now, actions)
            case UpgradeKRaftVersion():
                self.reconfiguration.upgrade_kraft_version(event, now, actions)
            case LogFlushed():
                self._on_log_flushed(event, now, actions)
            case Tick():
                pass
            case Resign():
                quorum.shutting_down = True
                state = quorum.state
                if isinstance(state, LeaderState):
                    quorum.become_resigned(now, actions, successors=state.successors())
            case Receive():
                if self._started:
                    self._on_receive(event.source_id, event.message, now, actions)
        if self._started:
            self._poll(now, actions)
        return actions

    def next_deadline(self) -> float | None:
        """When the node next wants a `Tick` (the `now` of its steps), or None: no timer runs."""
        deadlines = [self.quorum.requests.next_deadline(), self._role_deadline()]
        leader = self.quorum.state
        if isinstance(leader, LeaderState):
            deadlines.append(leader.check_quorum_deadline)
            deadlines.extend(p.deadline for p in leader.parked.values())
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def _role_deadline(self) -> float | None:
        quorum = self.quorum
        match quorum.state:
            case UnattachedState() as state:
                return state.election_deadline if quorum.may_stand() else None
            case ResignedState() as state:
                return None if quorum.shutting_down else state.election_deadline
            case ProspectiveState() as state:
                return state.election_deadline
            case CandidateState() as state:
                if state.backoff_deadline is not None:
                    return state.backoff_deadline
                return state.election_deadline
            case FollowerState() as state:
                standing = quorum.may_stand() or not quorum.is_voter
                return state.fetch_deadline if standing else None
        return None  # the leader: its timers are its own (check-quorum, held fetches)

    def _on_start(self, event: Start, now: float, actions: list[RaftAction]) -> None:
        if self._started:
            raise RuntimeError("the node has started already")
        self._started = True
        self.quorum.initialize(
            log_end_offset=event.log_end_offset,
            last_epoch=event.last_epoch,
            election_state=event.election_state,
            now=now,
            actions=actions,
        )

    def _on_log_flushed(self, event: LogFlushed, now: float, actions: list[RaftAction]) -> None:
        quorum = self.quorum
        flushed = max(quorum.flushed_offset, event.flushed_offset)
        quorum.flushed_offset = min(flushed, quorum.log_end_offset)
        leader = quorum.leader
        if leader is not None:
            leader.update_local_end(quorum.flushed_offset, now)
            self.replication.advance_high_watermark(now, actions)
            self.replication.complete_parked_fetches(now, actions)

    # Timers and outbound requests: every step ends here (Kafka's poll).

    def _poll(self, now: float, actions: list[RaftAction]) -> None:
        self.quorum.requests.expire(now)
        for _ in range(_TIMER_PASSES):
            if not self._expire_role_timer(now, actions):
                break
        leader = self.quorum.state
        if isinstance(leader, LeaderState):
            self.replication.complete_parked_fetches(now, actions)
            leader.forget_idle_observers(now)
        self._send_requests(now, actions)

    def _expire_role_timer(self, now: float, actions: list[RaftAction]) -> bool:
        """Act on the role's expired timer; True if that changed the role or its timers."""
        quorum = self.quorum
        match quorum.state:
            case UnattachedState() as state:
                if quorum.may_stand() and _expired(state.election_deadline, now):
                    quorum.become_prospective(now, actions)
                    return True
            case ProspectiveState() as state:
                if _expired(state.election_deadline, now):
                    quorum.prospective_lost(now, actions)
                    return True
            case CandidateState() as state:
                if state.backoff_deadline is not None:
                    if state.backoff_deadline <= now:
                        quorum.become_prospective(now, actions)
                        return True
                elif _expired(state.election_deadline, now):
                    quorum.start_backoff(state, now)
                    return True
            case FollowerState() as state:
                if _expired(state.fetch_deadline, now):
                    if quorum.may_stand():
                        quorum.become_prospective(now, actions)
                        return True
                    if not quorum.is_voter:
                        # An observer whose leader went quiet asks the voters (or the
                        # bootstrap servers) who leads now.
                        candidates = quorum.fetch_candidates()
                        if candidates:
                            state.fetch_target = quorum.random.choice(candidates)
                        state.fetch_deadline = now + quorum.config.fetch_timeout_ms / 1000
                        return True
            case LeaderState() as state:
                if _expired(state.check_quorum_deadline, now):
                    quorum.become_resigned(now, actions, successors=state.successors())
                    return True
            case ResignedState() as state:
                # (a leader removed from the voters moves on too, as an observer)
                if not quorum.shutting_down and _expired(state.election_deadline, now):
                    quorum.become_unattached(quorum.epoch + 1, now, actions)
                    return True
        return False

    def _send_requests(self, now: float, actions: list[RaftAction]) -> None:
        quorum, elections = self.quorum, self.elections
        match quorum.state:
            case ProspectiveState() | CandidateState() as state:
                if not isinstance(state, CandidateState) or state.backoff_deadline is None:
                    for voter_id in state.tally.unrecorded_voters():
                        quorum.send_request(voter_id, elections.vote_request, now, actions)
            case LeaderState() as state:
                for voter_id in sorted(state.unacknowledged_voters):
                    quorum.send_request(
                        voter_id, elections.begin_quorum_epoch_request, now, actions
                    )
            case ResignedState() as state:
                for voter_id in sorted(state.unacknowledged):
                    quorum.send_request(voter_id, elections.end_quorum_epoch_request, now, actions)
            case FollowerState() | UnattachedState():
                self.replication.maybe_send_fetch(now, actions)

    # Messages in.

    def _on_receive(
        self, source_id: int, message: RaftMessage, now: float, actions: list[RaftAction]
    ) -> None:
        elections, replication = self.elections, self.replication
        reply: RaftMessage | None = None
        match message:
            case VoteRequest():
                reply = elections.handle_vote_request(message, now, actions)
            case BeginQuorumEpochRequest():
                reply = elections.handle_begin_quorum_epoch_request(message, now, actions)
            case EndQuorumEpochRequest():
                reply = elections.handle_end_quorum_epoch_request(message, now, actions)
            case FetchRequest():
                reply = replication.handle_fetch_request(source_id, message, now, actions)
            case FetchSnapshotRequest():
                reply = replication.handle_fetch_snapshot_request(source_id, message, now, actions)
            case _:
                request = self.quorum.requests.take(source_id, message.correlation_id)
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
        elections, replication = self.elections, self.replication
        match request, response:
            case VoteRequest(), VoteResponse():
                elections.handle_vote_response(source_id, request, response, now, actions)
            case BeginQuorumEpochRequest(), BeginQuorumEpochResponse():
                elections.handle_begin_quorum_epoch_response(
                    source_id, request, response, now, actions
                )
            case EndQuorumEpochRequest(), EndQuorumEpochResponse():
                elections.handle_end_quorum_epoch_response(
                    source_id, request, response, now, actions
                )
            case FetchRequest(), FetchResponse():
                replication.handle_fetch_response(source_id, request, response, now, actions)
            case FetchSnapshotRequest(), FetchSnapshotResponse():
                replication.handle_fetch_snapshot_response(
                    source_id, request, response, now, actions
                )
            case _:
                self.quorum.requests.back_off(source_id, now)  # an answer to another question

    # Describing.

    def describe(self) -> QuorumDescription:
        """The quorum as this node sees it; replica progress is known only on the leader."""
        quorum = self.quorum
        leader = quorum.leader
        voters = leader.voter_progress if leader is not None else {}
        observers = leader.observer_progress if leader is not None else {}
        return QuorumDescription(
            node_id=quorum.node_id,
            role=quorum.role,
            leader_id=quorum.leader_id,
            epoch=quorum.epoch,
            high_watermark=quorum.high_watermark,
            voters=tuple(
                _replica_state(v.node_id, voters.get(v.node_id), v.directory_id)
                for v in quorum.voter_set
            ),
            observers=tuple(_replica_state(o, observers[o]) for o in sorted(observers)),
            voter_nodes=quorum.voter_set.nodes,
            kraft_version=quorum.kraft_version,
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
