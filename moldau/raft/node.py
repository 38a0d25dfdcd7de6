"""The Raft state machine of one voter, sans I/O: `RaftNode.step(event, now) -> actions` (KIP-595).

Roles and transitions (Kafka's KRaft names):

    unattached(e) --election timeout--> candidate(e+1, voted self)
    candidate(e)  --majority of votes--> leader(e)       (one voter: immediately)
    candidate(e)  --timeout-----------> candidate(e+1)
    any(e)        --hears leader at e' >= e--> follower(e', leader)
    leader(e)     --Resign-------------> resigned(e)      (graceful shutdown)

Invariants:
- the election state (epoch, vote, leader) is persisted (`PersistElectionState`) before any
  action that depends on it, so a restarted voter never votes twice in one epoch;
- a leader starts its epoch by appending a control entry (a leader change); the high watermark
  only advances past offsets durable on a majority, and only once that entry is, so entries
  of earlier epochs commit together with it (Raft's "commit only your own epoch" rule);
- the high watermark never goes backwards; `CommitUpTo(o)` means every offset below o is
  committed.

Implemented fully: the single-voter quorum (start → candidate → leader). The multi-voter paths
(Vote, BeginQuorumEpoch, Fetch between voters) are the seams marked below; until they exist a
node with several voters refuses to start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from moldau.raft.log import LogEntry
from moldau.raft.quorum_state import ElectionState


class Role(Enum):
    UNATTACHED = "unattached"
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


# Events.


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """The node opened its log and quorum-state file."""

    election_state: ElectionState | None
    log_end_offset: int
    last_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAppend:
    """The state machine above (the controller) wants `records` committed as one entry."""

    records: tuple[bytes, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFlushed:
    """Every record below `flushed_offset` is durable on this node."""

    flushed_offset: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; timers (election, fetch) are checked against `now`."""


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown: stop leading, accept no more appends."""


RaftEvent = Start | ClientAppend | LogFlushed | Tick | Resign


# Actions the driver carries out, in order.


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistElectionState:
    state: ElectionState


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendToLog:
    entry: LogEntry


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make the log durable up to its end and report back with `LogFlushed` (group commit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitUpTo:
    high_watermark: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChanged:
    leader_id: int | None
    epoch: int


RaftAction = PersistElectionState | AppendToLog | FlushLog | CommitUpTo | LeaderChanged


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterState:
    """What the leader knows of one voter: the end of its durable log (-1: unknown)."""

    voter_id: int
    log_end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumDescription:
    """A read-only view of the quorum for DescribeQuorum (KIP-595, KIP-836)."""

    node_id: int
    role: Role
    leader_id: int | None
    epoch: int
    high_watermark: int
    voters: tuple[VoterState, ...]


def leader_change_payload(leader_id: int, voters: tuple[int, ...]) -> bytes:
    """The single record of the control entry a leader starts its epoch with."""
    return json.dumps({"leaderId": leader_id, "voters": list(voters)}).encode("utf-8")


class RaftNode:
    """One voter's Raft state; all I/O happens in the driver that executes the returned actions."""

    def __init__(self, *, node_id: int, voters: tuple[int, ...]) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not one of the voters {voters}")
        self.node_id = node_id
        self.voters = voters
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.log_end_offset = 0
        self.high_watermark = 0
        self.epoch_start_offset = 0
        self._voter_end_offsets: dict[int, int] = {}

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def describe(self) -> QuorumDescription:
        """The quorum as this node sees it; voter end offsets are known only on the leader."""
        return QuorumDescription(
            node_id=self.node_id,
            role=self.role,
            leader_id=self.leader_id,
            epoch=self.epoch,
            high_watermark=self.high_watermark,
            voters=tuple(
                VoterState(voter_id=voter, log_end_offset=self._voter_end_offsets.get(voter, -1))
                for voter in self.voters
            ),
        )

    def step(self, event: RaftEvent, now: float) -> list[RaftAction]:
        match event:
            case Start():
                return self._on_start(event, now)
            case ClientAppend():
                return self._on_client_append(event)
            case LogFlushed():
                return self._on_log_flushed(event)
            case Tick():
                return []  # seam: election and fetch timeouts of the multi-voter quorum
            case Resign():
                return self._on_resign()

    def _on_start(self, event: Start, now: float) -> list[RaftAction]:
        self.log_end_offset = event.log_end_offset
        stored = event.election_state
        self.epoch = max(stored.epoch if stored else 0, event.last_epoch)
        if len(self.voters) > 1:
            # Seam: become unattached (or follower of the stored leader) and wait for an
            # election timeout or a BeginQuorumEpoch; needs the Vote/Fetch RPCs.
            raise NotImplementedError(
                "a metadata quorum of more than one voter is not supported yet"
            )
        # A single voter is a majority of one: it votes for itself and leads at once.
        actions: list[RaftAction] = []
        self.role = Role.CANDIDATE
        self.epoch += 1
        self.voted_id = self.node_id
        actions.append(PersistElectionState(state=self._election_state()))
        actions.extend(self._become_leader())
        return actions

    def _become_leader(self) -> list[RaftAction]:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self.epoch_start_offset = self.log_end_offset
        self._voter_end_offsets = {voter: 0 for voter in self.voters}
        entry = LogEntry(
            base_offset=self.log_end_offset,
            epoch=self.epoch,
            records=(leader_change_payload(self.node_id, self.voters),),
            is_control=True,
        )
        self.log_end_offset = entry.next_offset
        return [
            PersistElectionState(state=self._election_state()),
            LeaderChanged(leader_id=self.node_id, epoch=self.epoch),
            AppendToLog(entry=entry),
            FlushLog(),
        ]

    def _on_client_append(self, event: ClientAppend) -> list[RaftAction]:
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id, self.epoch)
        entry = LogEntry(base_offset=self.log_end_offset, epoch=self.epoch, records=event.records)
        self.log_end_offset = entry.next_offset
        return [AppendToLog(entry=entry), FlushLog()]

    def _on_log_flushed(self, event: LogFlushed) -> list[RaftAction]:
        if self.role is not Role.LEADER and self.role is not Role.RESIGNED:
            return []
        self._voter_end_offsets[self.node_id] = event.flushed_offset
        # The offset durable on a majority: sort descending, take the majority-th entry.
        acknowledged = sorted(self._voter_end_offsets.values(), reverse=True)
        majority_offset = acknowledged[len(self.voters) // 2]
        if majority_offset <= self.epoch_start_offset or majority_offset <= self.high_watermark:
            return []
        self.high_watermark = majority_offset
        return [CommitUpTo(high_watermark=majority_offset)]

    def _on_resign(self) -> list[RaftAction]:
        if self.role is Role.LEADER:
            self.role = Role.RESIGNED
            # Seam: send EndQuorumEpoch to the other voters so they elect a new leader quickly.
        return []

    def _election_state(self) -> ElectionState:
        return ElectionState(
            epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            voters=self.voters,
        )
