"""ShareFetch (key 78), v1: a share group member acquires records of the partitions this
broker leads, and acknowledges those it had (KIP-932).

v1 is the version Kafka 4.1 serves and its clients send. The request carries the member's share
session epoch (`moldau.share.sessions`): 0 opens a session with the partitions named (and may
not acknowledge: INVALID_REQUEST), a positive epoch continues it (adding the partitions named,
forgetting `forgotten_topics_data`), -1 closes it once its acknowledgements are applied and
releases what the member still holds. Session errors are the answer's top-level error.

Acknowledgements are applied first, each partition all or nothing (its
`acknowledge_error_code`); then the session's partitions are read through the replica manager
and records acquired for the member, at most `max_records` in all (a whole batch may exceed
it), sent with their acquired ranges and delivery counts. With nothing to acquire, the answer
waits up to `max_wait` for records (an append, or records others release): `min_bytes` is met
by any acquired record. Records are read within the group's `share.isolation.level` bound;
under read_committed, aborted transactions' records are archived, never sent. An incremental
session's answer leaves out partitions with nothing to say (no records, no error, not named in
the request), as Kafka's does.

The principal needs READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions). UNSUPPORTED_VERSION while share.version is not
finalized at 1 or more.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.handlers._share import (
    connection_token,
    endpoints_of,
    group_settings,
    refusal,
    share_partition,
    wire_leader,
)
from moldau.broker.registry import RequestContext, handler
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.manager import ShareFetchParams, SharePartitionAnswer
from moldau.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, PartitionId
from moldau.share.share_partition import AcknowledgementBatch

AckResult = tuple[int, str | None, tuple[int, int] | None]


def _refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "acquisition_lock_timeout": 0,
        "responses": [],
        "node_endpoints": [],
    }


def acknowledgement_batches(partition: Any) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(
            batch.first_offset, batch.last_offset, tuple(int(t) for t in batch.acknowledge_types)
        )
        for batch in partition.acknowledgement_batches
    ]


@handler(ApiKey.SHARE_FETCH, 1, 1)
def handle_share_fetch(ctx: RequestContext, request: Any) -> dict[str, Any] | Deferred:
    refused = refusal(ctx, request)
    if refused is not None:
        return _refused(*refused)
    manager = ctx.node.share_partitions
    assert manager is not None
    group_id, member_id = request.group_id, request.member_id
    epoch = request.share_session_epoch
    named: dict[PartitionId, list[AcknowledgementBatch]] = {
        (topic.topic_id, partition.partition_index): acknowledgement_batches(partition)
        for topic in request.topics
        for partition in topic.partitions
    }
    forgotten = [
        (topic.topic_id, index)
        for topic in request.forgotten_topics_data
        for index in topic.partitions
    ]
    sessions = manager.sessions
    session = None
    try:
        if epoch == INITIAL_EPOCH:
            if any(named.values()):
                raise KafkaError(
                    ErrorCode.invalid_request, "Acknowledge data present in the initial ShareFetch"
                )
            session = sessions.open(group_id, member_id, named, connection_token(ctx, manager))
            to_fetch = list(named)
        elif epoch == FINAL_EPOCH:
            if sessions.get(group_id, member_id) is None:
                raise KafkaError(ErrorCode.share_session_not_found)
            to_fetch = []
        else:
            session = sessions.next(group_id, member_id, epoch, added=named, forgotten=forgotten)
            to_fetch = list(session.partitions)
    except KafkaError as error:
        return _refused(error.code, error.message)

    acknowledged: dict[PartitionId, AckResult] = {
        where: manager.acknowledge(group_id, member_id, share_partition(ctx, *where), batches)
        for where, batches in named.items()
        if batches
    }
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        manager.release_member(group_id, member_id)
    settings = group_settings(ctx, group_id)
    params = ShareFetchParams(
        group_id=group_id,
        member_id=member_id,
        settings=settings,
        max_wait_ms=max(millis(request.max_wait), 0),
        max_bytes=request.max_bytes,
        max_records=request.max_records,
        session=session,
    )
    partitions = [share_partition(ctx, topic_id, index) for topic_id, index in to_fetch]

    def respond(answers: list[SharePartitionAnswer]) -> dict[str, Any]:
        full = epoch == INITIAL_EPOCH
        return _response(
            ctx, answers, acknowledged, set(named), full, settings.record_lock_duration_ms
        )

    deferred = Deferred()

    def completed(answers: list[SharePartitionAnswer]) -> None:
        try:
            deferred.resolve(respond(answers))
        except Exception as exc:  # answered by the dispatcher (UNKNOWN_SERVER_ERROR or close)
            deferred.fail(exc)

    answers = manager.fetch(params, partitions, completed) if partitions else []
    return respond(answers) if answers is not None else deferred


def _response(
    ctx: RequestContext,
    answers: list[SharePartitionAnswer],
    acknowledged: dict[PartitionId, AckResult],
    named: set[PartitionId],
    full: bool,
    lock_duration_ms: int,
) -> dict[str, Any]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    leaders: set[int] = set()
    answered: set[PartitionId] = set()
    for answer in answers:
        where = (answer.topic_id, answer.partition)
        ack_code, ack_message, ack_leader = acknowledged.get(where, (0, None, None))
        if not (full or where in named or answer.records or answer.error_code):
            continue  # an incremental session's answer leaves it out
        leader = answer.current_leader or ack_leader
        if leader is not None:
            leaders.add(leader[0])
        answered.add(where)
        by_topic.setdefault(answer.topic_id, []).append(
            {
                "partition_index": answer.partition,
                "error_code": answer.error_code,
                "error_message": answer.error_message,
                "acknowledge_error_code": ack_code,
                "acknowledge_error_message": ack_message,
                "current_leader": wire_leader(leader),
                "records": answer.records,
                "acquired_records": [
                    {
                        "first_offset": run.first_offset,
                        "last_offset": run.last_offset,
                        "delivery_count": run.delivery_count,
                    }
                    for run in answer.acquired
                ],
            }
        )
    for (topic_id, index), (ack_code, ack_message, ack_leader) in acknowledged.items():
        if (topic_id, index) in answered:
            continue  # (acknowledged but not fetched: a closing session, or forgotten)
        if ack_leader is not None:
            leaders.add(ack_leader[0])
        by_topic.setdefault(topic_id, []).append(
            {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "acknowledge_error_code": ack_code,
                "acknowledge_error_message": ack_message,
                "current_leader": wire_leader(ack_leader),
                "records": b"",
                "acquired_records": [],
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "acquisition_lock_timeout": lock_duration_ms,
        "responses": [
            {"topic_id": topic_id, "partitions": partitions}
            for topic_id, partitions in by_topic.items()
        ],
        "node_endpoints": endpoints_of(ctx, leaders),
    }
