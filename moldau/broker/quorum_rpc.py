"""The metadata quorum's messages on the wire: `moldau.raft.messages` to and from Kafka's RPCs.

Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), Fetch (1) and FetchSnapshot (59), all
about the one partition `__cluster_metadata-0`, whose topic id is Kafka's fixed metadata topic id
(`AAAAAAAAAAAAAAAAAAAAAQ`, the UUID with value 1). Requests go out at fixed versions (the newest
Moldau serves); answers are read back into the core's dataclasses.

The records of a Fetch are the log's entries as Kafka RecordBatch v2 batches: one batch per
entry, its base offset and partition leader epoch the entry's, control entries with the control
attribute and Kafka's control-record key (version 0, type LEADER_CHANGE, KRAFT_VERSION or VOTERS).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.raft.control_records import control_record_type
from moldau.raft.log import LogEntry, OffsetAndEpoch
from moldau.raft.messages import (
    HIGH_WATERMARK_NOT_SENT,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.voter_set import directory_id_of, directory_uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)

# The version each request goes out at.
VERSIONS = {
    ApiKey.VOTE: 2,
    ApiKey.BEGIN_QUORUM_EPOCH: 1,
    ApiKey.END_QUORUM_EPOCH: 1,
    ApiKey.FETCH: 18,  # (v18, KIP-1166: the fetcher's high watermark, so an idle fetch waits)
    ApiKey.FETCH_SNAPSHOT: 1,
}


def _leader(leader_id: int | None) -> int:
    return -1 if leader_id is None else leader_id


def _leader_or_none(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


# --- log entries as record batches ------------------------------------------------------------


def encode_entries(entries: tuple[LogEntry, ...]) -> bytes:
    parts = []
    for entry in entries:
        parts.append(
            build_batch(
                [
                    NewRecord(key=_control_key(record) if entry.is_control else None, value=record)
                    for record in entry.records
                ],
                base_offset=entry.base_offset,
                partition_leader_epoch=entry.epoch,
                control=entry.is_control,
            )
        )
    return b"".join(parts)


def _control_key(record: bytes) -> bytes:
    """Kafka's control-record key: version 0 and the record's type."""
    return struct.pack(">hh", 0, control_record_type(record))


def decode_entries(data: bytes | None) -> tuple[LogEntry, ...]:
    """Entries from a Fetch's record set; a batch that fails its CRC is refused."""
    if not data:
        return ()
    entries = []
    for batch in iter_batches(data):
        if not batch.is_valid():
            raise KafkaError(ErrorCode.corrupt_message, "a metadata batch failed its CRC")
        records = tuple(record.value or b"" for record in batch.records())
        entries.append(
            LogEntry(
                base_offset=batch.header.base_offset,
                epoch=batch.header.partition_leader_epoch,
                records=records,
                is_control=batch.header.is_control,
            )
        )
    return tuple(entries)


# --- requests out, answers back ---------------------------------------------------------------


def request_of(message: RaftRequest) -> tuple[ApiKey, dict[str, Any]]:
    """(api key, request body) for a request the core sends."""
    match message:
        case VoteRequest():
            return ApiKey.VOTE, {
                "cluster_id": message.cluster_id,
                "voter_id": message.voter_id,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "replica_epoch": message.replica_epoch,
                                "replica_id": message.replica_id,
                                "replica_directory_id": None,
                                "voter_directory_id": directory_uuid(message.voter_directory_id),
                                "last_offset_epoch": message.last_offset_epoch,
                                "last_offset": message.last_offset,
                                "pre_vote": message.pre_vote,
                            }
                        ],
                    }
                ],
            }
        case BeginQuorumEpochRequest():
            return ApiKey.BEGIN_QUORUM_EPOCH, {
                "cluster_id": message.cluster_id,
                "voter_id": message.voter_id,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "voter_directory_id": directory_uuid(message.voter_directory_id),
                                "leader_id": message.leader_id,
                                "leader_epoch": message.leader_epoch,
                            }
                        ],
                    }
                ],
                "leader_endpoints": [],
            }
        case EndQuorumEpochRequest():
            return ApiKey.END_QUORUM_EPOCH, {
                "cluster_id": message.cluster_id,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "leader_id": message.leader_id,
                                "leader_epoch": message.leader_epoch,
                                "preferred_candidates": [
                                    {"candidate_id": c, "candidate_directory_id": None}
                                    for c in message.preferred_candidates
                                ],
                            }
                        ],
                    }
                ],
                "leader_endpoints": [],
            }
        case FetchRequest():
            return ApiKey.FETCH, {
                "cluster_id": message.cluster_id,
                "replica_id": message.replica_id,
                "replica_state": {
                    "replica_id": message.replica_id,
                    "replica_epoch": message.replica_epoch,
                },
                "max_wait": message.max_wait_ms,
                "min_bytes": 1,
                "max_bytes": message.max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": METADATA_TOPIC,
                        "topic_id": METADATA_TOPIC_ID,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": message.current_leader_epoch,
                                "fetch_offset": message.fetch_offset,
                                "last_fetched_epoch": message.last_fetched_epoch,
                                "log_start_offset": message.log_start_offset,
                                "partition_max_bytes": message.partition_max_bytes,
                                "high_watermark": message.high_watermark,
                                "replica_directory_id": directory_uuid(
                                    message.replica_directory_id
                                ),
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
        case FetchSnapshotRequest():
            return ApiKey.FETCH_SNAPSHOT, {
                "cluster_id": message.cluster_id,
                "replica_id": message.replica_id,
                "max_bytes": message.max_bytes,
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": message.current_leader_epoch,
                                "snapshot_id": {
                                    "end_offset": message.snapshot_id.offset,
                                    "epoch": message.snapshot_id.epoch,
                                },
                                "position": message.position,
                                "replica_directory_id": None,
                            }
                        ],
                    }
                ],
            }
    raise TypeError(f"not a quorum request: {message!r}")


def _only_partition(response: Any, topics_field: str = "topics") -> Any:
    topics = getattr(response, topics_field)
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return None
    return topics[0].partitions[0]


def response_from(api_key: int, correlation_id: int, response: Any) -> RaftResponse:
    """The core's view of an answer to the request it sent with `correlation_id`."""
    top_error = ErrorCode(int(response.error_code)) if hasattr(response, "error_code") else None
    if api_key == ApiKey.VOTE:
        partition = _only_partition(response)
        if partition is None:
            return VoteResponse(
                correlation_id=correlation_id,
                error_code=top_error or ErrorCode.invalid_request,
                leader_id=None,
                leader_epoch=-1,
                vote_granted=False,
            )
        return VoteResponse(
            correlation_id=correlation_id,
            error_code=top_error or ErrorCode.none,
            partition_error_code=ErrorCode(int(partition.error_code)),
            leader_id=_leader_or_none(int(partition.leader_id)),
            leader_epoch=int(partition.leader_epoch),
            vote_granted=bool(partition.vote_granted),
        )
    if api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        kind = (
            BeginQuorumEpochResponse
            if api_key == ApiKey.BEGIN_QUORUM_EPOCH
            else EndQuorumEpochResponse
        )
        partition = _only_partition(response)
        if partition is None:
            return kind(
                correlation_id=correlation_id,
                error_code=top_error or ErrorCode.invalid_request,
                leader_id=None,
                leader_epoch=-1,
            )
        return kind(
            correlation_id=correlation_id,
            error_code=top_error or ErrorCode.none,
            partition_error_code=ErrorCode(int(partition.error_code)),
            leader_id=_leader_or_none(int(partition.leader_id)),
            leader_epoch=int(partition.leader_epoch),
        )
    if api_key == ApiKey.FETCH:
        partition = _only_partition(response, "responses")
        if partition is None:
            return FetchResponse(
                correlation_id=correlation_id,
                error_code=top_error if top_error else ErrorCode.invalid_request,
                current_leader_id=None,
                current_leader_epoch=-1,
            )
        diverging = partition.diverging_epoch
        snapshot = partition.snapshot_id
        leader = partition.current_leader
        return FetchResponse(
            correlation_id=correlation_id,
            error_code=top_error or ErrorCode.none,
            partition_error_code=ErrorCode(int(partition.error_code)),
            high_watermark=int(partition.high_watermark),
            log_start_offset=int(partition.log_start_offset),
            diverging_epoch=(
                OffsetAndEpoch(epoch=int(diverging.epoch), offset=int(diverging.end_offset))
                if int(diverging.epoch) >= 0
                else None
            ),
            current_leader_id=_leader_or_none(int(leader.leader_id)),
            current_leader_epoch=int(leader.leader_epoch),
            snapshot_id=(
                OffsetAndEpoch(epoch=int(snapshot.epoch), offset=int(snapshot.end_offset))
                if int(snapshot.end_offset) >= 0
                else None
            ),
            records=decode_entries(partition.records),
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        partition = _only_partition(response)
        if partition is None:
            return FetchSnapshotResponse(
                correlation_id=correlation_id,
                error_code=top_error or ErrorCode.invalid_request,
                snapshot_id=OffsetAndEpoch(epoch=-1, offset=-1),
                current_leader_id=None,
                current_leader_epoch=-1,
            )
        leader = partition.current_leader
        return FetchSnapshotResponse(
            correlation_id=correlation_id,
            error_code=top_error or ErrorCode.none,
            partition_error_code=ErrorCode(int(partition.error_code)),
            snapshot_id=OffsetAndEpoch(
                epoch=int(partition.snapshot_id.epoch), offset=int(partition.snapshot_id.end_offset)
            ),
            current_leader_id=_leader_or_none(int(leader.leader_id)),
            current_leader_epoch=int(leader.leader_epoch),
            size=int(partition.size),
            position=int(partition.position),
            unaligned_records=bytes(partition.unaligned_records or b""),
        )
    raise TypeError(f"not a quorum api: {api_key}")


# --- requests in, answers out ------------------------------------------------------------------


def request_from(api_key: int, correlation_id: int, request: Any) -> tuple[int, RaftRequest]:
    """(sender id, the core's view) of a request that arrived on a controller listener.
    Raises KafkaError(INVALID_REQUEST) when it is not about `__cluster_metadata-0`."""
    if api_key == ApiKey.FETCH:
        topics = request.topics
        if len(topics) != 1 or len(topics[0].partitions) != 1:
            raise KafkaError(ErrorCode.invalid_request, "a quorum fetch names one partition")
        topic = topics[0]
        partition = topic.partitions[0]
        name = getattr(topic, "topic", None)
        topic_id = getattr(topic, "topic_id", None)
        if (name != METADATA_TOPIC and topic_id != METADATA_TOPIC_ID) or partition.partition != 0:
            raise KafkaError(ErrorCode.invalid_request, "only __cluster_metadata-0 is fetched here")
        state = getattr(request, "replica_state", None)
        replica_id = int(state.replica_id) if state is not None else -1
        if replica_id < 0:
            replica_id = int(getattr(request, "replica_id", -1))
        return replica_id, FetchRequest(
            correlation_id=correlation_id,
            cluster_id=getattr(request, "cluster_id", None),
            replica_id=replica_id,
            replica_epoch=int(state.replica_epoch) if state is not None else -1,
            max_wait_ms=_millis(request.max_wait),
            max_bytes=int(request.max_bytes),
            # Fetch before v9 has no current leader epoch, before v12 no last fetched epoch,
            # before v5 no log start offset: Kafka's defaults (-1), which the core refuses as
            # Kafka's leader does (INVALID_REQUEST).
            current_leader_epoch=int(getattr(partition, "current_leader_epoch", -1)),
            fetch_offset=int(partition.fetch_offset),
            last_fetched_epoch=int(getattr(partition, "last_fetched_epoch", -1)),
            log_start_offset=int(getattr(partition, "log_start_offset", -1)),
            partition_max_bytes=int(partition.partition_max_bytes),
            high_watermark=int(getattr(partition, "high_watermark", HIGH_WATERMARK_NOT_SENT)),
            replica_directory_id=directory_id_of(getattr(partition, "replica_directory_id", None)),
        )
    partition = _only_partition(request)
    if partition is None:
        raise KafkaError(ErrorCode.invalid_request, "a quorum request names one partition")
    cluster_id = getattr(request, "cluster_id", None)
    if api_key == ApiKey.VOTE:
        replica_id = int(getattr(partition, "replica_id", getattr(partition, "candidate_id", -1)))
        return replica_id, VoteRequest(
            correlation_id=correlation_id,
            cluster_id=cluster_id,
            voter_id=int(getattr(request, "voter_id", -1)),
            replica_id=replica_id,
            replica_epoch=int(
                getattr(partition, "replica_epoch", getattr(partition, "candidate_epoch", -1))
            ),
            last_offset_epoch=int(partition.last_offset_epoch),
            last_offset=int(partition.last_offset),
            pre_vote=bool(getattr(partition, "pre_vote", False)),
            voter_directory_id=directory_id_of(getattr(partition, "voter_directory_id", None)),
        )
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        return int(partition.leader_id), BeginQuorumEpochRequest(
            correlation_id=correlation_id,
            cluster_id=cluster_id,
            voter_id=int(getattr(request, "voter_id", -1)),
            leader_id=int(partition.leader_id),
            leader_epoch=int(partition.leader_epoch),
            voter_directory_id=directory_id_of(getattr(partition, "voter_directory_id", None)),
        )
    if api_key == ApiKey.END_QUORUM_EPOCH:
        candidates = getattr(partition, "preferred_candidates", None)
        if candidates is not None:
            preferred = tuple(int(c.candidate_id) for c in candidates)
        else:
            preferred = tuple(int(c) for c in getattr(partition, "preferred_successors", ()))
        return int(partition.leader_id), EndQuorumEpochRequest(
            correlation_id=correlation_id,
            cluster_id=cluster_id,
            leader_id=int(partition.leader_id),
            leader_epoch=int(partition.leader_epoch),
            preferred_candidates=preferred,
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        return int(request.replica_id), FetchSnapshotRequest(
            correlation_id=correlation_id,
            cluster_id=cluster_id,
            replica_id=int(request.replica_id),
            max_bytes=int(request.max_bytes),
            current_leader_epoch=int(partition.current_leader_epoch),
            snapshot_id=OffsetAndEpoch(
                epoch=int(partition.snapshot_id.epoch), offset=int(partition.snapshot_id.end_offset)
            ),
            position=int(partition.position),
        )
    raise KafkaError(ErrorCode.invalid_request, f"not a quorum api: {api_key}")


def _millis(value: Any) -> int:
    from moldau.protocol.adapter import millis

    return millis(value)


def answer_of(message: RaftResponse) -> dict[str, Any]:
    """The response body for the core's answer (field names of the newest version)."""
    match message:
        case VoteResponse():
            return {
                "error_code": message.error_code,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": message.partition_error_code,
                                "leader_id": _leader(message.leader_id),
                                "leader_epoch": message.leader_epoch,
                                "vote_granted": message.vote_granted,
                            }
                        ],
                    }
                ],
            }
        case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
            return {
                "error_code": message.error_code,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": message.partition_error_code,
                                "leader_id": _leader(message.leader_id),
                                "leader_epoch": message.leader_epoch,
                            }
                        ],
                    }
                ],
            }
        case FetchResponse():
            diverging = message.diverging_epoch
            snapshot = message.snapshot_id
            return {
                "throttle_time": 0,
                "error_code": message.error_code,
                "session_id": 0,
                "responses": [
                    {
                        "topic": METADATA_TOPIC,
                        "topic_id": METADATA_TOPIC_ID,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": message.partition_error_code,
                                "high_watermark": message.high_watermark,
                                "last_stable_offset": message.high_watermark,
                                "log_start_offset": message.log_start_offset,
                                "diverging_epoch": {
                                    "epoch": diverging.epoch if diverging else -1,
                                    "end_offset": diverging.offset if diverging else -1,
                                },
                                "current_leader": {
                                    "leader_id": _leader(message.current_leader_id),
                                    "leader_epoch": message.current_leader_epoch,
                                },
                                "snapshot_id": {
                                    "end_offset": snapshot.offset if snapshot else -1,
                                    "epoch": snapshot.epoch if snapshot else -1,
                                },
                                "aborted_transactions": [],
                                "preferred_read_replica": -1,
                                "records": encode_entries(message.records),
                            }
                        ],
                    }
                ],
            }
        case FetchSnapshotResponse():
            return {
                "throttle_time": 0,
                "error_code": message.error_code,
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "index": 0,
                                "error_code": message.partition_error_code,
                                "snapshot_id": {
                                    "end_offset": message.snapshot_id.offset,
                                    "epoch": message.snapshot_id.epoch,
                                },
                                "current_leader": {
                                    "leader_id": _leader(message.current_leader_id),
                                    "leader_epoch": message.current_leader_epoch,
                                },
                                "size": message.size,
                                "position": message.position,
                                "unaligned_records": message.unaligned_records,
                            }
                        ],
                    }
                ],
            }
    raise TypeError(f"not a quorum response: {message!r}")
