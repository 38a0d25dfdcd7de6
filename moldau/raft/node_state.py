"""The state of one Raft node and its transitions between roles (Kafka's QuorumState and its
per-role EpochStates), shared by the halves of `RaftNode`: voting (`voting.py`) and
replication (`replication.py`). The transition table and invariants are in `node.py`.

Every transition goes through `_enter`, which persists the election state and tells the
listener of a new leader before anything that follows in the step, forgets the requests in
flight (their answers will be dropped), and answers the fetches a leader was holding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from enum import Enum

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
from moldau.raft.events import (
    AppendToLog,
    FlushLog,
    LeaderChanged,
    PersistElectionState,
    RaftAction,
    Refused,
    Send,
)
from moldau.raft.leader_state import LeaderState
from moldau.raft.log import LogEntry, OffsetAndEpoch, ReplicatedLog
from moldau.raft.messages import FetchRequest, FetchResponse, RaftRequest
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from moldau.raft.request_manager import RequestManager
from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, Endpoint, VoterSet, VoterSetHistory

RequestBuilder = Callable[[int, int], RaftRequest]  # (destination id, correlation id)


class Role(Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    FOLLOWER = "follower"
    LEADER = "leader"
    RESIGNED = "resigned"


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
    "NodeState",
    "NotLeaderError",
    "RaftSafetyError",
    "Role",
    "leader_change_payload",
]


class NodeState:
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
        self._snapshot_voters_pending = False  # an installed snapshot's header to read
        self.config = config or QuorumConfig()
        self.cluster_id = cluster_id
        self._random = rng or random.Random()
        self._log = log
        self._snapshots = snapshots
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.log_end_offset = 0
        self.last_epoch = 0
        self.flushed_offset = 0
        self.high_watermark = 0
        self.epoch_start_offset = 0
        self._started = False
        self._shutting_down = False
        self._requests = RequestManager(
            request_timeout=self.config.request_timeout_ms / 1000,
            retry_backoff=self.config.retry_backoff_ms / 1000,
        )
        self._leader: LeaderState | None = None
        self._tally: ElectionTally | None = None
        self._retries = 0
        self._election_deadline: float | None = None
        self._backoff_deadline: float | None = None  # a candidate waiting after a lost election
        self._fetch_deadline: float | None = None
        self._heard_from_leader = False
        # The leader this node names has answered it as the leader of the epoch (a fetch):
        # no other claim for the epoch is believed from then on. Unlike `_heard_from_leader`,
        # the leader's EndQuorumEpoch does not undo it.
        self._leader_confirmed = False
        self._fetch_target: int | None = None
        # The leader's snapshot this follower is fetching, and how much of it it has.
        self._fetching_snapshot: OffsetAndEpoch | None = None
        self._snapshot_position = 0
        self._installed_log_start = 0
        self._unacknowledged_resignation: set[int] = set()
        self._successors: tuple[int, ...] = ()
        self._persisted: ElectionState | None = None
        self._notified: tuple[int | None, int] = (None, 0)

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

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def _may_stand(self) -> bool:
        return (self.is_voter or self._removal_uncommitted()) and not self._shutting_down

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

    def _read_log(self) -> ReplicatedLog:
        if self._log is None:
            raise RuntimeError("this node was built without its log")
        return self._log

    # Transitions.

    def _enter(
        self,
        role: Role,
        *,
        epoch: int,
        leader_id: int | None,
        voted_id: int | None,
        actions: list[RaftAction],
    ) -> None:
        parked = self._leader.parked if self._leader is not None else {}
        if epoch != self.epoch or leader_id != self.leader_id:
            # Another leader's snapshot need not be the same bytes: a transfer starts over.
            # Through a pre-vote round and back to the same leader, it goes on, and the
            # leader stays confirmed.
            self._fetching_snapshot = None
            self._leader_confirmed = False
        if role is not Role.RESIGNED:
            self._leader = None  # a resigned leader keeps committing what its own flushes allow
        elif self._leader is not None:
            self._leader.parked = {}
        self.role = role
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_id = voted_id
        self._tally = None
        self._election_deadline = self._backoff_deadline = self._fetch_deadline = None
        self._heard_from_leader = False
        self._fetch_target = None
        self._requests.reset()
        self._persist(actions)
        self._notify_leader(actions)
        for fetch in parked.values():  # a replica waiting on us learns where the leader went
            error = self._fetch_error(fetch.request)
            actions.append(Send(destination_id=fetch.source_id, message=error))

    def _persist(self, actions: list[RaftAction]) -> None:
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

    def _new_election_deadline(self, now: float) -> float:
        timeout = random_election_timeout_ms(self.config.election_timeout_ms, self._random)
        return now + timeout / 1000

    def _become_unattached(
        self, epoch: int, now: float, actions: list[RaftAction], *, voted_id: int | None = None
    ) -> None:
        # An election already under way keeps its timer, as Kafka's: learning of a newer epoch
        # must not postpone it.
        electing = self.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)
        kept = self._election_deadline if electing else None
        self._enter(
            Role.UNATTACHED, epoch=epoch, leader_id=None, voted_id=voted_id, actions=actions
        )
        if self._may_stand() or self.is_voter:
            self._election_deadline = kept if kept is not None else self._new_election_deadline(now)

    def _become_follower(
        self, epoch: int, leader_id: int, now: float, actions: list[RaftAction]
    ) -> None:
        voted_id = self.voted_id if epoch == self.epoch else None
        self._enter(
            Role.FOLLOWER, epoch=epoch, leader_id=leader_id, voted_id=voted_id, actions=actions
        )
        self._retries = 0
        self._fetch_target = leader_id
        self._fetch_deadline = now + self.config.fetch_timeout_ms / 1000

    def _become_prospective(self, now: float, actions: list[RaftAction]) -> None:
        self._enter(
            Role.PROSPECTIVE,
            epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            actions=actions,
        )
        self._tally = ElectionTally(self.voter_set, self.node_id)
        self._election_deadline = self._new_election_deadline(now)
        if self._tally.is_won:
            self._become_candidate(now, actions)

    def _prospective_lost(self, now: float, actions: list[RaftAction]) -> None:
        if self.leader_id is not None and self.leader_id != self.node_id:
            self._become_follower(self.epoch, self.leader_id, now, actions)
            return
        self._enter(
            Role.UNATTACHED,
            epoch=self.epoch,
            leader_id=None,
            voted_id=self.voted_id,
            actions=actions,
        )
        self._election_deadline = self._new_election_deadline(now)

    def _become_candidate(self, now: float, actions: list[RaftAction]) -> None:
        self._retries += 1
        self._enter(
            Role.CANDIDATE,
            epoch=self.epoch + 1,
            leader_id=None,
            voted_id=self.node_id,
            actions=actions,
        )
        self._tally = ElectionTally(self.voter_set, self.node_id)
        self._election_deadline = self._new_election_deadline(now)
        if self._tally.is_won:
            self._become_leader(now, actions)

    def _start_backoff(self, now: float) -> None:
        backoff = lost_election_backoff_ms(
            self._retries, self.config.election_backoff_max_ms, self._random
        )
        self._backoff_deadline = now + backoff / 1000
        self._requests.reset()

    def _become_leader(self, now: float, actions: list[RaftAction]) -> None:
        self._enter(
            Role.LEADER,
            epoch=self.epoch,
            leader_id=self.node_id,
            voted_id=self.voted_id,
            actions=actions,
        )
        self._retries = 0
        self.epoch_start_offset = self.log_end_offset
        self._leader = LeaderState(
            local_id=self.node_id,
            voters=self.voter_set,
            epoch_start_offset=self.epoch_start_offset,
            now=now,
            check_quorum_timeout=self.config.check_quorum_timeout_ms / 1000,
            local_directory_id=self.directory_id,
        )
        self._leader.update_local_end(self.flushed_offset, now)
        records = [leader_change_payload(self.node_id, self.voters)]
        if self.log_end_offset == 0 and self.kraft_version >= KRAFT_VERSION_DYNAMIC:
            # The first leader of a quorum formatted with dynamic voters writes the bootstrap
            # checkpoint's records into the log, so that replicas that join later learn them.
            records += [kraft_version_payload(self.kraft_version), voters_payload(self.voter_set)]
        self._append_as_leader(tuple(records), actions, is_control=True, now=now)

    def _become_resigned(
        self, now: float, actions: list[RaftAction], *, successors: tuple[int, ...]
    ) -> None:
        self._enter(
            Role.RESIGNED,
            epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            actions=actions,
        )
        self._successors = successors
        self._unacknowledged_resignation = set(successors)
        self._election_deadline = self._new_election_deadline(now)

    def _append_as_leader(
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
            self._track_control_entry(entry, now, actions)

    # The voter set along the log.

    def _track_control_entry(self, entry: LogEntry, now: float, actions: list[RaftAction]) -> None:
        """A control entry reached the log: its kraft.version and voters count from now on."""
        changes = control_changes(entry.records)
        if changes.kraft_version is not None:
            self._history.add_kraft_version(entry.base_offset, changes.kraft_version)
        if changes.voters is not None:
            before = self.voter_set
            self._history.add_voters(entry.last_offset, changes.voters)
            if changes.voters != before:
                self._on_voters_changed(now, actions)

    def _forget_voters_from(self, offset: int, now: float, actions: list[RaftAction]) -> None:
        """The log was truncated at `offset`: voter changes written there are undone."""
        if self._history.truncate_from(offset):
            self._on_voters_changed(now, actions)

    def _load_voter_history(self) -> None:
        """Read the voter set from the snapshot the log starts at (its header) and the control
        entries after it; static voters when neither names any."""
        base = VoterSet.of(self.static_voters) if self.static_voters else VoterSet()
        kraft_version = 0
        log = self._log
        snapshots = self._snapshots
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

    def _on_voters_changed(self, now: float, actions: list[RaftAction]) -> None:
        """The latest voter set changed: a leader counts the new majority; a replica that
        became a voter starts its election timer."""
        leader = self._leader
        if leader is not None and self.role is Role.LEADER:
            leader.set_voters(self.voter_set, now)
        elif self.role is Role.UNATTACHED and self._may_stand() and self._election_deadline is None:
            self._election_deadline = self._new_election_deadline(now)

    # What messages say of the quorum.

    def _learn(
        self,
        leader_id: int | None,
        epoch: int,
        now: float,
        actions: list[RaftAction],
        *,
        source_id: int,
        from_leader: bool = False,
    ) -> ErrorCode | None:
        """Move to what a message says of the quorum, if it is news (Kafka's maybeTransition);
        `from_leader`: the leader itself said so, which outranks a leader this node has not
        heard from. A claim that contradicts what this node knows of its epoch (another
        leader of an epoch it leads, or of one whose leader it has heard from), or an epoch
        no election could follow, changes nothing: it is refused with INVALID_REQUEST (where
        Kafka's node fails on an IllegalStateException), and `source_id` is named in the
        `Refused` action."""
        if epoch >= LAST_EPOCH:
            return self._refuse(
                source_id, "epoch", f"epoch {epoch} leaves no room for an election", actions
            )
        if epoch < self.epoch or leader_id == self.node_id:
            return None
        if epoch > self.epoch:
            if leader_id is not None:
                self._become_follower(epoch, leader_id, now, actions)
            else:
                self._become_unattached(epoch, now, actions)
            return None
        known = self.leader_id
        if leader_id is None or leader_id == known:
            if self.role is not Role.FOLLOWER and leader_id is not None and from_leader:
                self._become_follower(epoch, leader_id, now, actions)
            return None
        if known is None:
            if self.role is not Role.FOLLOWER:
                self._become_follower(epoch, leader_id, now, actions)
            return None
        if known != self.node_id and from_leader and not self._leader_confirmed:
            # The leader this node named for the epoch never answered it as leader (a message
            # that named it may have lied); the one that says it leads is followed. Its
            # fetch answers confirm it, and from then on no other claim is believed.
            self._become_follower(epoch, leader_id, now, actions)
            return None
        holder = "this node" if known == self.node_id else f"node {known}"
        return self._refuse(
            source_id,
            "leader",
            f"node {leader_id} named as leader of epoch {epoch}, which {holder} leads",
            actions,
        )

    def _refuse(
        self, source_id: int, kind: str, reason: str, actions: list[RaftAction]
    ) -> ErrorCode:
        """A message said what cannot be true: INVALID_REQUEST, and a `Refused` to log."""
        actions.append(Refused(source_id=source_id, kind=kind, reason=reason))
        return ErrorCode.invalid_request

    def _learned_from_response(
        self,
        source_id: int,
        leader_id: int | None,
        epoch: int,
        now: float,
        actions: list[RaftAction],
    ) -> bool:
        """True when the response is stale or taught us a new epoch or leader: it has nothing
        more to say (Kafka's maybeHandleCommonResponse). When this node names a leader of its
        epoch it has not heard from (the message that named it may have lied), a node it asked
        that answers as the epoch's leader itself is believed (what others say of the leader
        is not: they may have been lied to as well, and believing them can go round in a
        circle of followers that never stand)."""
        if epoch < self.epoch:
            return True
        corrected = (
            epoch == self.epoch
            and self.role in (Role.FOLLOWER, Role.PROSPECTIVE)
            and not self._leader_confirmed
            and self.leader_id not in (None, self.node_id)
            and leader_id not in (None, self.leader_id)
            and source_id == leader_id
        )
        if epoch > self.epoch or (leader_id is not None and self.leader_id is None) or corrected:
            self._learn(leader_id, epoch, now, actions, source_id=source_id, from_leader=corrected)
            return True
        return False

    # Requests out and their checks in.

    def _send_request(
        self, destination_id: int, build: RequestBuilder, now: float, actions: list[RaftAction]
    ) -> None:
        if not self._requests.is_ready(destination_id, now):
            return
        request = build(destination_id, self._requests.next_correlation_id())
        self._requests.sent(destination_id, request, now)
        actions.append(Send(destination_id=destination_id, message=request))

    def _cluster_id_error(
        self, source_id: int, cluster_id: str | None, actions: list[RaftAction]
    ) -> ErrorCode | None:
        """INCONSISTENT_CLUSTER_ID for a request of another cluster. A request without one
        (null: Fetch before v12 cannot carry it, the others may leave it out) is taken, as
        Kafka's hasValidClusterId takes it; an empty one is another cluster's."""
        if cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id:
            return None
        actions.append(
            Refused(
                source_id=source_id,
                kind="cluster-id",
                reason=f"node {source_id} is of cluster {cluster_id!r}, not {self.cluster_id!r}",
            )
        )
        return ErrorCode.inconsistent_cluster_id

    def _leader_only_error(self, epoch: int) -> ErrorCode | None:
        """Kafka's validateLeaderOnlyRequest: the sender's epoch against ours, then our role."""
        if epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if epoch > self.epoch:
            return ErrorCode.unknown_leader_epoch
        if self.role is not Role.LEADER:
            return ErrorCode.not_leader_or_follower
        return None

    def _fetch_error(self, request: FetchRequest) -> FetchResponse:
        return FetchResponse(
            correlation_id=request.correlation_id,
            partition_error_code=(
                self._leader_only_error(request.current_leader_epoch)
                or ErrorCode.not_leader_or_follower
            ),
            current_leader_id=self.leader_id,
            current_leader_epoch=self.epoch,
        )
