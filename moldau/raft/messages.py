"""The quorum's RPCs as the Raft core sees them: one dataclass per Kafka request or response.

Each maps field for field onto the kio message of the newest version (Vote v2,
BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18, FetchSnapshot v1), flattened to the one
partition there is, `__cluster_metadata-0` (Kafka's metadata topic id
`AAAAAAAAAAAAAAAAAAAAAQ` in Fetch). What the wirer fills in or drops:

- `correlation_id` is the request header's; a response echoes its request's, and the node drops
  a response whose correlation id is not the one it waits for from that node.
- `leader_id` None is Kafka's -1; absent `diverging_epoch`/`snapshot_id` are Kafka's defaults
  (epoch -1, end offset -1).
- Directory ids (KIP-853): a Fetch carries the fetcher's (`replica_directory_id`), which the
  leader checks when a voter is added; Vote and BeginQuorumEpoch carry the receiver's as the
  sender's voter set names it (`voter_directory_id`), which the receiver checks. Endpoints
  (`leader_endpoints`, `node_endpoints`) are the transport's: the core knows nodes by id, and
  passes the voters' endpoints through from the voter set.
- `error_code` is the top-level error (INCONSISTENT_CLUSTER_ID, INVALID_REQUEST for a request
  naming another partition); `partition_error_code` the partition's.
- Fetch: `replica_id`/`replica_epoch` are `replica_state`'s; `records` are whole log entries (the
  driver encodes them as the response's record set); `max_bytes` is the request's top-level
  limit and `partition_max_bytes` the partition's; min_bytes 1, isolation level 0, session id 0
  and session epoch -1 are constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode
from moldau.raft.log import LogEntry, OffsetAndEpoch

NO_ERROR = ErrorCode.none


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest:
    """A (pre-)vote request from a prospective or candidate voter (Vote, key 52)."""

    correlation_id: int
    cluster_id: str | None
    voter_id: int  # the receiver
    replica_id: int  # the sender
    replica_epoch: int  # a candidate's new epoch; a prospective's current epoch (pre-vote)
    last_offset_epoch: int
    last_offset: int  # the sender's log end offset
    pre_vote: bool
    voter_directory_id: str | None = None  # the receiver's, as the sender's voter set has it


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse:
    correlation_id: int
    error_code: ErrorCode = NO_ERROR
    partition_error_code: ErrorCode = NO_ERROR
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest:
    """A new leader announcing its epoch to a voter (BeginQuorumEpoch, key 53)."""

    correlation_id: int
    cluster_id: str | None
    voter_id: int  # the receiver
    leader_id: int
    leader_epoch: int
    voter_directory_id: str | None = None  # the receiver's, as the leader's voter set has it


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochResponse:
    correlation_id: int
    error_code: ErrorCode = NO_ERROR
    partition_error_code: ErrorCode = NO_ERROR
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest:
    """A leader stepping down, naming the voters it would like to succeed it, most caught up
    first (EndQuorumEpoch, key 54)."""

    correlation_id: int
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_candidates: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochResponse:
    correlation_id: int
    error_code: ErrorCode = NO_ERROR
    partition_error_code: ErrorCode = NO_ERROR
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    """A follower or observer reading the log from `fetch_offset` (Fetch, key 1). A follower
    only fetches from an offset it has flushed: the leader counts `fetch_offset` as durable
    there."""

    correlation_id: int
    cluster_id: str | None
    replica_id: int
    replica_epoch: int = -1
    max_wait_ms: int
    max_bytes: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int  # the epoch of the entry before fetch_offset (0: none)
    log_start_offset: int
    partition_max_bytes: int
    # v18 (KIP-1166): the high watermark the replica knows, -1 if none yet; a fetcher of an
    # older version cannot say (HIGH_WATERMARK_NOT_SENT).
    high_watermark: int = -1
    replica_directory_id: str | None = None  # v17: the fetcher's metadata log directory


# Fetch v18's default for `high_watermark`: the fetcher does not send it (an older version).
HIGH_WATERMARK_NOT_SENT = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    correlation_id: int
    error_code: ErrorCode = NO_ERROR
    partition_error_code: ErrorCode = NO_ERROR
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: OffsetAndEpoch | None = None
    current_leader_id: int | None
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch | None = None
    records: tuple[LogEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotRequest:
    """A follower reading a chunk of the leader's snapshot (FetchSnapshot, key 59)."""

    correlation_id: int
    cluster_id: str | None
    replica_id: int
    max_bytes: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotResponse:
    correlation_id: int
    error_code: ErrorCode = NO_ERROR
    partition_error_code: ErrorCode = NO_ERROR
    snapshot_id: OffsetAndEpoch
    current_leader_id: int | None
    current_leader_epoch: int
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
RaftMessage = RaftRequest | RaftResponse
