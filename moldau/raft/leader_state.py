"""What a leader tracks in its epoch (Kafka's LeaderState, the leader's epoch state): each
replica's durable log end from its fetches, the high watermark they support, which voters
acknowledged the epoch, the check-quorum window, and the fetches it holds until there is
something to answer; and the state of a leader that resigned (Kafka's ResignedState), which
keeps the epoch's `LeaderState` to go on committing what its own flushes allow.

Invariants: a replica's offset is recorded only from a fetch whose offset and epoch match the
leader's log, so it is a prefix of the leader's log durable on that replica; the high watermark
is the largest offset durable on a majority of voters, and it moves only forward and only past
the epoch's first offset (the leader-change entry), so entries of earlier epochs commit with
one of this epoch (Raft's rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from moldau.raft.epoch_states import EpochState, Role
from moldau.raft.messages import FetchRequest
from moldau.raft.voter_set import VoterSet

__all__ = [
    "OBSERVER_SESSION_TIMEOUT",
    "LeaderState",
    "ParkedFetch",
    "ReplicaProgress",
    "ResignedState",
]

OBSERVER_SESSION_TIMEOUT = 300.0  # seconds without a fetch before an observer is forgotten


@dataclass(slots=True, kw_only=True)
class ReplicaProgress:
    replica_id: int
    directory_id: str | None = None  # from its fetches (KIP-853)
    end_offset: int = -1  # durable log end from the last valid fetch; -1: unknown
    last_fetch_time: float | None = None
    last_caught_up_time: float | None = None
    # The leader's log end when the replica last fetched: reaching it later means the replica
    # was caught up as of that fetch (Kafka's lastCaughtUpTimestamp).
    leader_end_offset_at_last_fetch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedFetch:
    source_id: int
    request: FetchRequest
    deadline: float


class LeaderState(EpochState):
    role: ClassVar[Role] = Role.LEADER

    def __init__(
        self,
        *,
        epoch: int,
        voted_id: int | None,
        local_id: int,
        voters: VoterSet,
        epoch_start_offset: int,
        now: float,
        check_quorum_timeout: float,
        local_directory_id: str | None = None,
    ) -> None:
        super().__init__(epoch=epoch, leader_id=local_id, voted_id=voted_id)
        self.local_id = local_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        # The leader's own durable log end; counted towards the high watermark only while it
        # is a voter (a leader removed from the voter set leads on until that commits).
        self.local_progress = ReplicaProgress(replica_id=local_id, directory_id=local_directory_id)
        self.voter_progress: dict[int, ReplicaProgress] = {}
        self.observer_progress: dict[int, ReplicaProgress] = {}
        self.unacknowledged_voters: set[int] = set()
        self.check_quorum_timeout = check_quorum_timeout
        self._fetched_voters: set[int] = set()
        self.check_quorum_deadline: float | None = None
        self.parked: dict[int, ParkedFetch] = {}
        self.set_voters(voters, now)

    def set_voters(self, voters: VoterSet, now: float) -> None:
        """The voter set changed (a VotersRecord appended or truncated): replicas move between
        voters and observers with their progress; new voters are told of the epoch."""
        everyone = {**self.observer_progress, **self.voter_progress}
        self.voters = voters
        self.voter_progress = {}
        for voter_id in voters.voter_ids:
            if voter_id == self.local_id:
                self.voter_progress[voter_id] = self.local_progress
            else:
                known = everyone.pop(voter_id, None)
                self.voter_progress[voter_id] = known or ReplicaProgress(replica_id=voter_id)
        everyone.pop(self.local_id, None)
        self.observer_progress = everyone
        self.unacknowledged_voters = {v for v in self.unacknowledged_voters if v in voters} | {
            v
            for v in voters.voter_ids
            if v != self.local_id and self.voter_progress[v].last_fetch_time is None
        }
        self._fetched_voters &= set(voters.voter_ids)
        others = [v for v in voters.voter_ids if v != self.local_id]
        if not others:
            self.check_quorum_deadline = None
        elif self.check_quorum_deadline is None:
            self.check_quorum_deadline = now + self.check_quorum_timeout

    def update_local_end(self, durable_end_offset: int, now: float) -> None:
        progress = self.local_progress
        progress.end_offset = max(progress.end_offset, durable_end_offset)
        progress.last_fetch_time = now
        progress.last_caught_up_time = now

    def update_replica(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        leader_end_offset: int,
        now: float,
        directory_id: str | None = None,
    ) -> None:
        """A valid fetch from `replica_id`: every record below `fetch_offset` is on its log."""
        if replica_id in self.voters:
            progress = self.voter_progress[replica_id]
            self.unacknowledged_voters.discard(replica_id)
        else:
            progress = self.observer_progress.setdefault(
                replica_id, ReplicaProgress(replica_id=replica_id)
            )
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_time = now
        elif fetch_offset >= progress.leader_end_offset_at_last_fetch >= 0:
            progress.last_caught_up_time = progress.last_fetch_time
        progress.end_offset = fetch_offset
        progress.last_fetch_time = now
        if directory_id is not None:
            progress.directory_id = directory_id
        progress.leader_end_offset_at_last_fetch = leader_end_offset

    def record_voter_fetch(self, voter_id: int, now: float) -> None:
        """Check-quorum: once a majority (the leader included, if a voter) has fetched, the
        window restarts."""
        if voter_id not in self.voters or self.check_quorum_deadline is None:
            return
        self._fetched_voters.add(voter_id)
        if self.voters.is_majority(self._fetched_voters | {self.local_id}):
            self._fetched_voters.clear()
            self.check_quorum_deadline = now + self.check_quorum_timeout

    def acknowledge(self, voter_id: int) -> None:
        self.unacknowledged_voters.discard(voter_id)

    def next_high_watermark(self, current: int) -> int | None:
        """A larger high watermark that a majority of voters now supports, or None."""
        ends = sorted((p.end_offset for p in self.voter_progress.values()), reverse=True)
        if len(ends) < self.voters.majority:
            return None
        majority_end = ends[self.voters.majority - 1]
        if majority_end <= self.epoch_start_offset or majority_end <= current:
            return None
        return majority_end

    def successors(self) -> tuple[int, ...]:
        """The other voters, the most caught up first (EndQuorumEpoch's preferred candidates)."""
        others = [p for v, p in self.voter_progress.items() if v != self.local_id]
        others.sort(key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)

    def forget_idle_observers(self, now: float) -> None:
        for observer_id, progress in list(self.observer_progress.items()):
            last = progress.last_fetch_time
            if last is not None and now - last >= OBSERVER_SESSION_TIMEOUT:
                del self.observer_progress[observer_id]


@dataclass(kw_only=True, eq=False)
class ResignedState(EpochState):
    """A leader that stepped down, or that led the epoch before a restart (`leader` is then
    None): it tells the other voters (EndQuorumEpoch, `successors` first in line) and stands
    no more in the epoch; past `election_deadline` it moves to the next."""

    role: ClassVar[Role] = Role.RESIGNED
    election_deadline: float
    successors: tuple[int, ...] = ()
    unacknowledged: set[int] = field(default_factory=set)
    leader: LeaderState | None = None
