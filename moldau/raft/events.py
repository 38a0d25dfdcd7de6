"""What goes into `RaftNode.step(event, now)` and what comes out: events and actions.

The driver executes a step's actions in order, all of them before the next step: a
`PersistElectionState` is durable before the `Send` after it leaves, an `AppendToLog` is in the
log before the `CommitUpTo` after it is delivered. The node reads the log (read-only) only as it
stood when the step began.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.log import LogEntry, OffsetAndEpoch
from moldau.raft.messages import RaftMessage
from moldau.raft.quorum_state import ElectionState
from moldau.raft.voter_set import VoterNode

# Events.


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """The node opened its log and quorum-state file; the log is durable up to its end."""

    election_state: ElectionState | None
    log_end_offset: int
    last_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAppend:
    """The state machine above (the controller) wants `records` committed as one entry."""

    records: tuple[bytes, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddVoter:
    """Make `voter` (an observer that has caught up) a voter (AddRaftVoter, KIP-853); only
    the leader takes it, and only with no other voter change uncommitted."""

    voter: VoterNode


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveVoter:
    """Remove the voter `voter_id` (with that directory id, if given) (RemoveRaftVoter)."""

    voter_id: int
    directory_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateVoter:
    """A voter announces its endpoints (UpdateRaftVoter); the leader writes them into the voter
    set if they changed."""

    voter: VoterNode


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeKRaftVersion:
    """Raise kraft.version to `version` (UpdateFeatures for kraft.version, KIP-853): from 0 to
    1 the leader writes the static voters, with their directory ids and endpoints, into the
    log. `validate_only`: run the checks, append nothing."""

    version: int
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFlushed:
    """Every record below `flushed_offset` is durable on this node."""

    flushed_offset: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; timers (election, fetch, requests, check-quorum) are checked against `now`."""


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown: stop leading (telling the voters with EndQuorumEpoch), accept no more
    appends, start no election."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Receive:
    """A request or response arrived from node `source_id`."""

    source_id: int
    message: RaftMessage


RaftEvent = (
    Start
    | ClientAppend
    | AddVoter
    | RemoveVoter
    | UpdateVoter
    | UpgradeKRaftVersion
    | LogFlushed
    | Tick
    | Resign
    | Receive
)


# Actions the driver carries out, in order.


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistElectionState:
    """Write the quorum-state file (durably) before carrying out the next action."""

    state: ElectionState


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendToLog:
    entry: LogEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncateLog:
    """Drop every entry at or after `offset` (an entry boundary), durably."""

    offset: int


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make the log durable up to its end and report back with `LogFlushed` (group commit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteSnapshotChunk:
    """Add `data` at byte `position` of the partial snapshot being received (0 starts anew)."""

    snapshot_id: OffsetAndEpoch
    position: int
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSnapshot:
    """The partial snapshot is whole: complete it, replace the log with it
    (`truncate_to_snapshot`), and have the state machine load it. Everything below its end
    offset is committed."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitUpTo:
    """Every offset below `high_watermark` is committed: hand those entries to the listener."""

    high_watermark: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChanged:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Send `message` (a request, or the response to one) to node `destination_id`."""

    destination_id: int
    message: RaftMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """A message from `source_id` said what cannot be true (another leader of an epoch this
    node leads, a truncation below its high watermark, ...): it was answered with an error or
    dropped, and nothing changed. `reason` is one line for the log; the driver rate-limits it,
    since whoever sent one may send many."""

    source_id: int
    kind: str  # what was refused, for rate-limiting: "leader", "epoch", "truncation", ...
    reason: str


RaftAction = (
    PersistElectionState
    | AppendToLog
    | TruncateLog
    | WriteSnapshotChunk
    | InstallSnapshot
    | FlushLog
    | CommitUpTo
    | LeaderChanged
    | Send
    | Refused
)
