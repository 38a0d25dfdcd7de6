"""DescribeQuorum (key 55), v0-2: the state of the metadata quorum (KIP-595, KIP-836, KIP-853).

v0 is flexible; v1 adds each replica's last fetch and last caught-up timestamps; v2 adds the
top-level and partition error messages, each replica's directory id and the voters' `nodes`
with their listeners. Only `__cluster_metadata` partition 0 exists: a request naming anything
else gets UNKNOWN_TOPIC_OR_PARTITION for each partition it names; a node that does not lead the
quorum answers NOT_LEADER_OR_FOLLOWER (a broker passes the request on to the active controller).
Voters and observers (brokers that follow the log without a vote) are reported with their log
end offsets and the wall-clock times of their last fetch and of when they were last caught up,
as the leader saw them; the leader reports itself as fetched and caught up now (as Kafka does).
With static voters (`controller.quorum.voters`) directory ids are zero and `nodes` lists each
voter's configured controller listener; with dynamic voters (KIP-853) they are the voter set's
(directory ids and endpoints as the log names them), and observers' directory ids are those
their fetches carry.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.metadata.records import ZERO_UUID
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.raft.node import QuorumDescription
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, directory_uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


@handler(ApiKey.DESCRIBE_QUORUM, 0, 2, forward=True)
def handle_describe_quorum(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.DESCRIBE)
    if not _names_the_metadata_partition(request):
        return _response(
            topics=[
                {
                    "topic_name": topic.topic_name,
                    "partitions": [
                        _partition_error(p.partition_index, ErrorCode.unknown_topic_or_partition)
                        for p in topic.partitions
                    ],
                }
                for topic in request.topics
            ]
        )
    quorum: QuorumDescription = ctx.controller.describe_quorum()
    if quorum.leader_id != quorum.node_id:
        error = _partition_error(METADATA_PARTITION, ErrorCode.not_leader_or_follower)
        return _response(topics=[{"topic_name": METADATA_TOPIC, "partitions": [error]}])
    clock = ctx.node.clock
    now_ms = clock.now_ms()
    now = clock.monotonic()

    def wall_ms(replica_id: int, when: float | None) -> int:
        if replica_id == quorum.leader_id:
            return now_ms
        return -1 if when is None else now_ms - round((now - when) * 1000)

    def replicas(states: Any) -> list[dict[str, Any]]:
        return [
            {
                "replica_id": state.replica_id,
                "replica_directory_id": directory_uuid(state.directory_id) or ZERO_UUID,
                "log_end_offset": state.log_end_offset,
                "last_fetch_timestamp": wall_ms(state.replica_id, state.last_fetch_time),
                "last_caught_up_timestamp": wall_ms(state.replica_id, state.last_caught_up_time),
            }
            for state in states
        ]

    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": ErrorCode.none,
        "error_message": None,
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.epoch,
        "high_watermark": quorum.high_watermark,
        "current_voters": replicas(quorum.voters),
        "observers": replicas(quorum.observers),
    }
    return _response(
        topics=[{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        nodes=_voter_nodes(ctx, quorum),
    )


def _voter_nodes(ctx: RequestContext, quorum: QuorumDescription) -> list[dict[str, Any]]:
    """Each voter's controller listener (its broker endpoints for a node standing alone)."""
    layout = ctx.node.layout
    names = layout.controller_listener_names
    if quorum.kraft_version >= KRAFT_VERSION_DYNAMIC:
        return [
            {
                "node_id": voter.node_id,
                "listeners": [
                    {"name": e.name, "host": e.host, "port": e.port} for e in voter.endpoints
                ],
            }
            for voter in quorum.voter_nodes
        ]
    if layout.voters:
        return [
            {
                "node_id": voter.node_id,
                "listeners": [{"name": names[0], "host": voter.host, "port": voter.port}],
            }
            for voter in layout.voters
        ]
    brokers = ctx.node.metadata_image.brokers
    return [
        {
            "node_id": voter.replica_id,
            "listeners": [
                {"name": endpoint.name, "host": endpoint.host, "port": endpoint.port}
                for endpoint in (
                    brokers[voter.replica_id].endpoints if voter.replica_id in brokers else ()
                )
            ],
        }
        for voter in quorum.voters
    ]


def _names_the_metadata_partition(request: Any) -> bool:
    topics = request.topics
    return (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and topics[0].partitions[0].partition_index == METADATA_PARTITION
    )


def _partition_error(partition_index: int, code: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": partition_index,
        "error_code": code,
        "error_message": None,
        # Kafka leaves these at the message defaults on errors.
        "leader_id": 0,
        "leader_epoch": 0,
        "high_watermark": 0,
        "current_voters": [],
        "observers": [],
    }


def _response(*, topics: list[dict[str, Any]], nodes: list[Any] | None = None) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": topics,
        "nodes": nodes or [],
    }
