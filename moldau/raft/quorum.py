"""The quorum as one node sees it, Kafka's `QuorumState`: the epoch state of the node's role
(one object per role and epoch: `epoch_states.py`, `leader_state.py`) and the transitions
between them, the voter set along the log, where its log ends and what is committed. The
parts of `RaftNode` work on it: elections (`voting.py`), fetching (`replication.py`) and voter
changes (`reconfiguration.py`), each believing or refusing what a message says of the quorum
through `claims.py`; the transition table and invariants are in `node.py`.

Every transition goes through `_enter`, which persists the election state and tells the
listener of a new leader before anything that follows in the step, forgets the requests in
flight (their answers will be dropped), and answers the fetches a leader was holding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from moldau.protocol.errors import ErrorCode
from moldau.raft.control_records import (
    control_changes,
    kraft_version_payload,
    leader_change_payload,
    read_snapshot_header,
    voters_payload,
)
from moldau.raft.election import (
    ElectionTally,
    lost_election_backoff_ms,
    random_election_timeout_ms,
)
from moldau.raft.epoch_states import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    Role,
    UnattachedState,
)
from moldau.raft.events import (
    AppendToLog,
    FlushLog,
    LeaderChanged,
    PersistElectionState,
    RaftAction,
    Send,
)
from moldau.raft.leader_state import LeaderState, ResignedState
from moldau.raft.log import LogEntry, OffsetAndEpoch, ReplicatedLog
from moldau.raft.messages import FetchRequest, FetchResponse, RaftRequest
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from moldau.raft.request_manager import RequestManager
from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, Endpoint, VoterSet, VoterSetHistory

RequestBuilder = Callable[[int, int], RaftRequest]  # (destination id, correlation id)


class NotLeaderError(Exception):
    """An append was offered to a node that is not the leader; `leader_id` says who is."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftSafetyError(RuntimeError):
    """The node's own state broke an invariant (a genuine bug, never a peer's message: those
    are refused with an error answer): the driver stops the node rather than act on it."""


# The largest epoch (an int32 on the wire). A message naming it is refused: a node that moved
# there could never stand for the next one, and the quorum would elect nobody ever again.
LAST_EPOCH = 2**31 - 1


__all__ = [
    "LAST_EPOCH",
    "NotLeaderError",
    "QuorumState",
    "RaftSafetyError",
    "Role",
    "leader_change_payload",
]


class QuorumState:
    """`state` is the epoch state of the node's role; it changes only through the `become_*`
    transitions (and `initialize`, at start). The rest outlives a role: the node's identity,
    the voter set history, its log's end and high watermark, the requests in flight."""

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
        self.node_id = node_id
        self.directory_id = directory_id
        # Static voters (controller.quorum.voters, kraft.version 0), or none: the voters are
        # then those the log and its snapshot name (KIP-853), and a node that knows none yet
        # finds the quorum through `bootstrap_ids` (controller.quorum.bootstrap.servers, which
        # the transport maps to addresses).
        self.static_voters = tuple(sorted(set(voters)))
        if not self.static_voters and not bootstrap_ids and log is None:
            raise ValueError("a node needs its voters, or bootstrap servers and its log")
        self.bootstrap_ids = bootstrap_ids
        # Where the static voters listen (controller.quorum.voters' host:port under the first
        # of controller.listener.names): what the kraft.version upgrade writes for them.
        self.static_voter_endpoints = dict(voter_endpoints or {})
        self._history = VoterSetHistory(
            VoterSet.of(self.static_voters) if self.static_voters else VoterSet()
        )
        self.snapshot_voters_pending = False  # an installed snapshot's header to read
        self.config = config or QuorumConfig()
        self.cluster_id = cluster_id
        self.random = rng or random.Random()
        self.log = log
        self.snapshots = snapshots
        self.state: EpochState = UnattachedState(epoch=0)
        # The log as far as the node knows it (it reads its log, the driver writes it).
        self.log_end_offset = 0
        self.last_epoch = 0
        self.flushed_offset = 0
        self.high_watermark = 0
        self.epoch_start_offset = 0  # where this node's last epoch as leader began
        self.shutting_down = False
        self.requests = RequestManager(
            request_timeout=self.config.request_timeout_ms / 1000,
            retry_backoff=self.config.retry_backoff_ms / 1000,
        )
        self.election_retries = 0  # elections stood since the node last followed or led
        # Of the epoch's leader, kept through a pre-vote round that ends with the same one:
        # it has answered this node as the leader (a fetch), so no other claim for the epoch
        # is believed from then on (unlike the follower's `heard_from_leader`, its
        # EndQuorumEpoch does not undo it); and the snapshot of its being fetched, and how
        # much of it this node has.
        self.leader_confirmed = False
        self.fetching_snapshot: OffsetAndEpoch | None = None
        self.snapshot_position = 0
        self.installed_log_start = 0
        self._persisted: ElectionState | None = None
        self._notified: tuple[int | None, int] = (None, 0)  # the last LeaderChanged told

    # What the epoch state says.

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id

    @property
    def voted_id(self) -> int | None:
        return self.state.voted_id

    @property
    def is_leader(self) -> bool:
        return self.state.role is Role.LEADER

    @property
    def leader(self) -> LeaderState | None:
        """The epoch's leader state, on its leader and once that resigned."""
        state = self.state
        if isinstance(state, LeaderState):
            return state
        if isinstance(state, ResignedState):
            return state.leader
        return None

    # The voters.

    @property
    def voter_set(self) -> VoterSet:
        """The voters as of this node's log end (a change counts once it is in the log)."""
        return self._history.latest

    @property
    def voters(self) -> tuple[int, ...]:
        return self.voter_set.voter_ids

    @property
    def kraft_version(self) -> int:
        return self._history.kraft_version

    @property
    def is_voter(self) -> bool:
        return self.voter_set.has_voter(self.node_id, self.directory_id)

    @property
    def last_voter_change_offset(self) -> int:
        return self._history.last_change_offset

    def voter_set_at(self, offset: int) -> VoterSet:
        """The voters in force at `offset` (for a snapshot's header)."""
        return self._history.value_at(offset)

    def kraft_version_at(self, offset: int) -> int:
        return self._history.kraft_version_at(offset)

    def fetch_candidates(self) -> tuple[int, ...]:
        """Whom a replica that knows no leader asks: the voters it knows, and the bootstrap
        servers."""
        known = [*self.voters, *self.bootstrap_ids]
        return tuple(dict.fromkeys(v for v in known if v != self.node_id))

    def may_stand(self) -> bool:
        return (self.is_voter or self._removal_uncommitted()) and not self.shutting_down

    def _removal_uncommitted(self) -> bool:
        """The newest voter change in this node's log removed it, and it does not know that
        change committed. It still stands, counting the votes of the new set (Raft's rule):
        a leader that removed itself and crashed before that committed may hold the longest
        log, and the remaining voters could elect nobody without it."""
        last_change = self._history.last_change_offset
        if last_change < self.high_watermark:
            return False
        before = self._history.value_at(last_change - 1)
        return before.has_voter(self.node_id, self.directory_id)

    def read_log(self) -> ReplicatedLog:
        if self.log is None:
            raise RuntimeError("this node was built without its log")
        return self.log

    # Transitions.

    def initialize(
        self,
        *,
        log_end_offset: int,
        last_epoch: int,
        election_state: ElectionState | None,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        """The first state, from the log and the quorum-state file (Kafka's
        `QuorumState.initialize`): a follower of the leader it knew, unattached (with its
        vote) otherwise, resigned if it led that epoch; a single voter stands at once."""
        self.log_end_offset = self.flushed_offset = log_end_offset
        self.last_epoch = last_epoch
        if self.log is not None:
            # What the log starts after is in a snapshot: committed.
            self.high_watermark = self.log.log_start.offset
        stored = election_state
        self._persisted = stored
        stored_epoch = stored.epoch if stored else 0
        self.load_voter_history()
        if self.voters == (self.node_id,) and self.is_voter:
            # A single voter is a majority of one: it votes for itself and leads at once.
            self.state = UnattachedState(epoch=max(stored_epoch, last_epoch))
            self.become_candidate(now, actions)
            return
        if self.log is None:
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
        self.state = UnattachedState(epoch=stored_epoch)
        if stored is None or stored_epoch < last_epoch:
            self.become_unattached(max(stored_epoch, last_epoch), now, actions)
        elif stored.leader_id == self.node_id:
            # It led this epoch before the restart: resigned, so it neither votes again in the
            # epoch nor reuses offsets that lost, unflushed entries of the epoch had.
            self.state = UnattachedState(
                epoch=stored_epoch, leader_id=self.node_id, voted_id=stored.voted_id
            )
            self._notified = (self.node_id, stored_epoch)
            self.become_resigned(now, actions, successors=())
        elif stored.leader_id is not None:
            self.state = UnattachedState(epoch=stored_epoch, voted_id=stored.voted_id)
            self.become_follower(stored_epoch, stored.leader_id, now, actions)
        else:
            self.become_unattached(stored_epoch, now, actions, voted_id=stored.voted_id)

    def _enter(self, state: EpochState, actions: list[RaftAction]) -> None:
        old = self.state
        parked = old.parked if isinstance(old, LeaderState) else {}
        if state.epoch != old.epoch or state.leader_id != old.leader_id:
            # Another leader's snapshot need not be the same bytes: a transfer starts over.
            # Through a pre-vote round and back to the same leader, it goes on, and the
            # leader stays confirmed.
            self.fetching_snapshot = None
            self.leader_confirmed = False
        if isinstance(state, ResignedState) and state.leader is not None:
            state.leader.parked = {}  # (it goes on committing what its own flushes allow)
        self.state = state
        self.requests.reset()
        self.persist(actions)
        self._notify_leader(actions)
        for fetch in parked.values():  # a replica waiting on us learns where the leader went
            error = self.fetch_error(fetch.request)
            actions.append(Send(destination_id=fetch.source_id, message=error))

    def persist(self, actions: list[RaftAction]) -> None:
        """Persist the election state if it changed (before anything that depends on it)."""
        state = ElectionState(
            epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            voters=self.voters if self.kraft_version < KRAFT_VERSION_DYNAMIC else (),
        )
        if state != self._persisted:
            self._persisted = state
            actions.append(PersistElectionState(state=state))

    def _notify_leader(self, actions: list[RaftAction]) -> None:
        known = (self.leader_id, self.epoch)
        if known != self._notified and (known[0] is not None or self._notified[0] is not None):
            self._notified = known
            actions.append(LeaderChanged(leader_id=self.leader_id, epoch=self.epoch))

    def new_election_deadline(self, now: float) -> float:
        timeout = random_election_timeout_ms(self.config.election_timeout_ms, self.random)
        return now + timeout / 1000

    def become_unattached(
        self, epoch: int, now: float, actions: list[RaftAction], *, voted_id: int | None = None
    ) -> None:
        # An election already under way keeps its timer, as Kafka's: learning of a newer epoch
        # must not postpone it.
        old = self.state
        kept = None
        if isinstance(old, UnattachedState | ProspectiveState | CandidateState):
            kept = old.election_deadline
        state = UnattachedState(epoch=epoch, voted_id=voted_id)
        self._enter(state, actions)
        if self.may_stand() or self.is_voter:
            state.election_deadline = kept if kept is not None else self.new_election_deadline(now)

    def become_follower(
        self, epoch: int, leader_id: int, now: float, actions: list[RaftAction]
    ) -> None:
        state = FollowerState(
            epoch=epoch,
            leader_id=leader_id,
            voted_id=self.voted_id if epoch == self.epoch else None,
            fetch_target=leader_id,
            fetch_deadline=now + self.config.fetch_timeout_ms / 1000,
        )
        self._enter(state, actions)
        self.election_retries = 0

    def become_prospective(self, now: float, actions: list[RaftAction]) -> None:
        tally = ElectionTally(self.voter_set, self.node_id)
        state = ProspectiveState(
            epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            tally=tally,
            election_deadline=self.new_election_deadline(now),
        )
        self._enter(state, actions)
        if tally.is_won:
            self.become_candidate(now, actions)

    def prospective_lost(self, now: float, actions: list[RaftAction]) -> None:
        leader_id = self.leader_id
        if leader_id is not None and leader_id != self.node_id:
            self.become_follower(self.epoch, leader_id, now, actions)
            return
        state = UnattachedState(
            epoch=self.epoch,
            voted_id=self.voted_id,
            election_deadline=self.new_election_deadline(now),
        )
        self._enter(state, actions)

    def become_candidate(self, now: float, actions: list[RaftAction]) -> None:
        self.election_retries += 1
        tally = ElectionTally(self.voter_set, self.node_id)
        state = CandidateState(
            epoch=self.epoch + 1,
            voted_id=self.node_id,
            tally=tally,
            election_deadline=self.new_election_deadline(now),
        )
        self._enter(state, actions)
        if tally.is_won:
            self.become_leader(now, actions)

    def start_backoff(self, candidate: CandidateState, now: float) -> None:
        """The candidate lost its election: it waits before standing again."""
        backoff = lost_election_backoff_ms(
            self.election_retries, self.config.election_backoff_max_ms, self.random
        )
        candidate.backoff_deadline = now + backoff / 1000
        self.requests.reset()

    def become_leader(self, now: float, actions: list[RaftAction]) -> None:
        leader = LeaderState(
            epoch=self.epoch,
            voted_id=self.voted_id,
            local_id=self.node_id,
            voters=self.voter_set,
            epoch_start_offset=self.log_end_offset,
            now=now,
            check_quorum_timeout=self.config.check_quorum_timeout_ms / 1000,
            local_directory_id=self.directory_id,
        )
        self._enter(leader, actions)
        self.election_retries = 0
        self.epoch_start_offset = self.log_end_offset
        leader.update_local_end(self.flushed_offset, now)
        records = [leader_change_payload(self.node_id, self.voters)]
        if self.log_end_offset == 0 and self.kraft_version >= KRAFT_VERSION_DYNAMIC:
            # The first leader of a quorum formatted with dynamic voters writes the bootstrap
            # checkpoint's records into the log, so that replicas that join later learn them.
            records += [kraft_version_payload(self.kraft_version), voters_payload(self.voter_set)]
        self.append_as_leader(tuple(records), actions, is_control=True, now=now)

    def become_resigned(
        self, now: float, actions: list[RaftAction], *, successors: tuple[int, ...]
    ) -> None:
        old = self.state
        state = ResignedState(
            epoch=old.epoch,
            leader_id=old.leader_id,
            voted_id=old.voted_id,
            election_deadline=self.new_election_deadline(now),
            successors=successors,
            unacknowledged=set(successors),
            leader=old if isinstance(old, LeaderState) else None,
        )
        self._enter(state, actions)

    def append_as_leader(
        self,
        records: tuple[bytes, ...],
        actions: list[RaftAction],
        *,
        is_control: bool = False,
        now: float = 0.0,
    ) -> None:
        entry = LogEntry(
            base_offset=self.log_end_offset,
            epoch=self.epoch,
            records=records,
            is_control=is_control,
        )
        self.log_end_offset = entry.next_offset
        self.last_epoch = self.epoch
        actions.append(AppendToLog(entry=entry))
        actions.append(FlushLog())
        if is_control:
            self.track_control_entry(entry, now, actions)

    # The voter set along the log.

    def track_control_entry(self, entry: LogEntry, now: float, actions: list[RaftAction]) -> None:
        """A control entry reached the log: its kraft.version and voters count from now on."""
        changes = control_changes(entry.records)
        if changes.kraft_version is not None:
            self._history.add_kraft_version(entry.base_offset, changes.kraft_version)
        if changes.voters is not None:
            before = self.voter_set
            self._history.add_voters(entry.last_offset, changes.voters)
            if changes.voters != before:
                self.on_voters_changed(now, actions)

    def forget_voters_from(self, offset: int, now: float, actions: list[RaftAction]) -> None:
        """The log was truncated at `offset`: voter changes written there are undone."""
        if self._history.truncate_from(offset):
            self.on_voters_changed(now, actions)

    def load_voter_history(self) -> None:
        """Read the voter set from the snapshot the log starts at (its header) and the control
        entries after it; static voters when neither names any."""
        base = VoterSet.of(self.static_voters) if self.static_voters else VoterSet()
        kraft_version = 0
        log = self.log
        snapshots = self.snapshots
        if log is not None and snapshots is not None:
            latest = snapshots.latest_snapshot_id()
            if latest is not None and latest.offset == log.log_start.offset:
                header = read_snapshot_header(snapshots, latest)
                if header is not None:
                    kraft_version = header.kraft_version or 0
                    base = header.voters if header.voters is not None else base
        self._history = VoterSetHistory(base, kraft_version=kraft_version)
        if log is None:
            return
        for entry in log.read(log.log_start.offset):
            if entry.is_control:
                changes = control_changes(entry.records)
                if changes.kraft_version is not None:
                    self._history.add_kraft_version(entry.base_offset, changes.kraft_version)
                if changes.voters is not None:
                    self._history.add_voters(entry.last_offset, changes.voters)

    def read_installed_snapshot_voters(self, now: float, actions: list[RaftAction]) -> None:
        """The snapshot installed in the last step is in the store now: its header names the
        voters from its end offset on."""
        self.snapshot_voters_pending = False
        before = self.voter_set
        self.load_voter_history()
        if self.voter_set != before:
            self.on_voters_changed(now, actions)

    def on_voters_changed(self, now: float, actions: list[RaftAction]) -> None:
        """The latest voter set changed: a leader counts the new majority; a replica that
        became a voter starts its election timer."""
        state = self.state
        if isinstance(state, LeaderState):
            state.set_voters(self.voter_set, now)
        elif (
            isinstance(state, UnattachedState)
            and self.may_stand()
            and state.election_deadline is None
        ):
            state.election_deadline = self.new_election_deadline(now)

    # Requests out, and the leader-only check of requests in.

    def send_request(
        self, destination_id: int, build: RequestBuilder, now: float, actions: list[RaftAction]
    ) -> None:
        if not self.requests.is_ready(destination_id, now):
            return
        request = build(destination_id, self.requests.next_correlation_id())
        self.requests.sent(destination_id, request, now)
        actions.append(Send(destination_id=destination_id, message=request))

    def leader_only_error(self, epoch: int) -> ErrorCode | None:
        """Kafka's validateLeaderOnlyRequest: the sender's epoch against ours, then our role."""
        if epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if epoch > self.epoch:
            return ErrorCode.unknown_leader_epoch
        if self.role is not Role.LEADER:
            return ErrorCode.not_leader_or_follower
        return None

    def fetch_error(self, request: FetchRequest) -> FetchResponse:
        return FetchResponse(
            correlation_id=request.correlation_id,
            partition_error_code=(
                self.leader_only_error(request.current_leader_epoch)
                or ErrorCode.not_leader_or_follower
            ),
            current_leader_id=self.leader_id,
            current_leader_epoch=self.epoch,
        )
