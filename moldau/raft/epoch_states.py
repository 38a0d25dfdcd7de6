"""What a Raft node knows in each role, Kafka's `EpochState` implementations: one object per
role and epoch, replaced on every transition (`quorum.py`), so what belongs to one role (a
tally, a timer, a fetch target) cannot outlive it. The leader's and the resigned leader's are
in `leader_state.py`.

Every state names its epoch, the leader it knows of and the vote it gave in that epoch: what
the quorum-state file keeps (Kafka's ElectionState).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from moldau.raft.election import ElectionTally

__all__ = [
    "CandidateState",
    "EpochState",
    "FollowerState",
    "ProspectiveState",
    "Role",
    "UnattachedState",
]


class Role(Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    FOLLOWER = "follower"
    LEADER = "leader"
    RESIGNED = "resigned"


@dataclass(kw_only=True, eq=False)
class EpochState:
    role: ClassVar[Role]
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None


@dataclass(kw_only=True, eq=False)
class UnattachedState(EpochState):
    """No leader known in the epoch. A voter stands when `election_deadline` passes; an
    observer has none and fetches from any voter it knows."""

    role: ClassVar[Role] = Role.UNATTACHED
    election_deadline: float | None = None


@dataclass(kw_only=True, eq=False)
class ProspectiveState(EpochState):
    """Asking for pre-votes (KIP-996), in the epoch it is in, naming the leader it knew if any."""

    role: ClassVar[Role] = Role.PROSPECTIVE
    tally: ElectionTally
    election_deadline: float


@dataclass(kw_only=True, eq=False)
class CandidateState(EpochState):
    """Asking for votes in the epoch it moved to, having voted for itself; after a lost
    election, waiting until `backoff_deadline` before standing again."""

    role: ClassVar[Role] = Role.CANDIDATE
    tally: ElectionTally
    election_deadline: float
    backoff_deadline: float | None = None


@dataclass(kw_only=True, eq=False)
class FollowerState(EpochState):
    """Fetching from the epoch's leader (or, told by a fetch answer, from another replica that
    names it): `fetch_target`. It stands when `fetch_deadline` passes without an answer."""

    role: ClassVar[Role] = Role.FOLLOWER
    leader_id: int
    fetch_deadline: float
    fetch_target: int | None = None
    # The leader answered a fetch since this state began: pre-votes are refused (KIP-996).
    heard_from_leader: bool = False
