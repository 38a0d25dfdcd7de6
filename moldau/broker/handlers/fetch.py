"""Fetch (key 1), v4-18: read partitions from an offset, waiting for `min_bytes` up to `max_wait_ms`.

v4 adds isolation_level and last_stable_offset/aborted_transactions; v5 log_start_offset; v7
fetch sessions (KIP-227: we answer session id 0, so clients keep sending full fetches); v9
current_leader_epoch; v11 rack and preferred read replica; v12 flexible, diverging epoch; v13
topic ids; v15 replica state; v16 node endpoints (KIP-951); v17 replica directory id; v18 the
high watermark the follower knows (KIP-1166, a tagged field; MAX_INT64 when not sent).

Record data goes to the socket from the segment files (`sendfile`); the response is encoded by
hand (`protocol.fetch_response`) because of that. The handler is a plain function: a fetch with
enough data answers at once, and one that must wait returns a `Deferred` completed by the append
that makes it ready (or by its `max_wait_ms` timer), with no task and no future in between. At
least one batch is returned for the first partition with data even if it exceeds the byte
limits, as Kafka does (KIP-74).

A fetch naming a replica id (`replica_id` before v15, `replica_state` after) is a follower
replicating: it reads up to the log end rather than the high watermark, gets the diverging epoch
when its log went astray, and its fetch offset is its progress (`ReplicaManager.
read_for_follower`). Only a replica of the partition is served so. From v18 a follower's fetch
that would wait for data is answered at once when the leader's high watermark is past the one
the follower knows (KIP-1166), so followers learn it without waiting `max_wait_ms`.

A consumer held to a consumer_byte_rate asks for at most what its quota lets through at once
(`ClientQuota.fetch_max_bytes`); the throttling itself is the dispatcher's (moldau.broker.quotas).
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.broker.handlers._redirects import node_endpoints
from moldau.broker.registry import RequestContext, handler
from moldau.broker.responses import Response
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_request import replica_of
from moldau.protocol.fetch_response import (
    FetchPartitionData,
    FetchTopicData,
    encode_fetch_response,
)
from moldau.raft.messages import HIGH_WATERMARK_NOT_SENT
from moldau.replication.consumer_fetch import ConsumerFetchParams, PartitionFetch, records_size
from moldau.types import TopicPartition

_ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.FETCH, 4, 18)
def handle_fetch(ctx: RequestContext, request: Any) -> Response | Deferred:
    node = ctx.node
    image = node.metadata_image
    version = ctx.api_version
    isolation_level = getattr(request, "isolation_level", 0)
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)
    min_bytes = request.min_bytes
    max_wait_ms = max(millis(request.max_wait), 0)

    topics: list[tuple[FetchTopicData, list[PartitionFetch]]] = []
    replica_id, replica_epoch = replica_of(request)
    # A follower needs CLUSTER_ACTION, a consumer READ on each topic; authorization comes
    # before existence, as in Kafka.
    followers_allowed = replica_id < 0 or ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    unknown = ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition
    for topic in request.topics:
        topic_id = getattr(topic, "topic_id", None)
        name = getattr(topic, "topic", None)
        if version >= 13:
            found = image.topics_by_id.get(topic_id) if topic_id is not None else None
            name = found.name if found is not None else None
        else:
            found = image.topics.get(name) if name is not None else None
            topic_id = found.topic_id if found is not None else _ZERO_UUID
        error = ErrorCode.none
        if not followers_allowed or (
            replica_id < 0
            and name is not None
            and not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, name)
        ):
            error = ErrorCode.topic_authorization_failed
        elif name is None:
            error = unknown
        fetches = [
            PartitionFetch(
                TopicPartition(name, p.partition) if name and not error else None,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1),
                error,
            )
            for p in topic.partitions
        ]
        topics.append((FetchTopicData(name or "", topic_id or _ZERO_UUID), fetches))

    if replica_id >= 0:
        return _replica_fetch(
            ctx, request, topics, replica_id, replica_epoch, max_bytes, max_wait_ms
        )
    if ctx.quota is not None:  # a consumer under consumer_byte_rate (moldau.broker.quotas)
        max_bytes = ctx.quota.fetch_max_bytes(max_bytes)
    params = ConsumerFetchParams(
        isolation_level=isolation_level,
        max_bytes=max_bytes,
        min_bytes=min_bytes,
        max_wait_ms=max_wait_ms,
        allow_follower=version >= 11,  # KIP-392
        rack=getattr(request, "rack_id", "") or "",
        leader_of=lambda tp: _leader_in(image, tp),
    )
    fetches = [fetch for _, partitions in topics for fetch in partitions]

    def respond(answers: list[FetchPartitionData]) -> Response:
        return _respond(ctx, version, _by_topic(topics, answers))

    answer = Deferred()

    def completed(answers: list[FetchPartitionData]) -> None:
        try:
            answer.resolve(respond(answers))
        except Exception as exc:  # answered by the dispatcher (UNKNOWN_SERVER_ERROR or close)
            answer.fail(exc)

    answers = node.replica_manager.fetch(fetches, params, completed)
    return respond(answers) if answers is not None else answer


def _leader_in(image: Any, tp: TopicPartition) -> tuple[int, int] | None:
    """(leader, leader epoch) of a partition the metadata knows, wherever it is hosted."""
    topic = image.topics.get(tp.topic)
    known = topic.partitions.get(tp.partition) if topic is not None else None
    return (known.leader, known.leader_epoch) if known is not None else None


def _by_topic(
    topics: list[tuple[FetchTopicData, list[PartitionFetch]]], answers: list[FetchPartitionData]
) -> list[FetchTopicData]:
    """The partitions' answers (in the order asked) grouped by their topics again."""
    grouped = []
    position = 0
    for topic_data, partitions in topics:
        count = len(partitions)
        grouped.append(
            FetchTopicData(
                topic_data.name, topic_data.topic_id, answers[position : position + count]
            )
        )
        position += count
    return grouped


def _respond(ctx: RequestContext, version: int, result: list[FetchTopicData]) -> Response:
    """Encode an answer: file regions copied on TLS, leaders named in redirects with their
    endpoints (KIP-951)."""
    leaders: set[int] = set()
    for topic_data in result:
        for partition in topic_data.partitions:
            if not ctx.zero_copy and isinstance(partition.records, list):
                partition.records = b"".join(r.read_bytes() for r in partition.records)
            if partition.current_leader is not None:
                leaders.add(partition.current_leader[0])
    endpoints = (
        [
            (broker["node_id"], broker["host"], broker["port"], broker["rack"])
            for broker in node_endpoints(ctx, leaders)
        ]
        if leaders
        else []
    )
    return Response(
        encode_fetch_response(
            version,
            throttle_time_ms=0,
            error_code=0,
            session_id=0,
            topics=result,
            node_endpoints=endpoints,
        )
    )


def _replica_fetch(
    ctx: RequestContext,
    request: Any,
    topics: list[tuple[FetchTopicData, list[PartitionFetch]]],
    replica_id: int,
    replica_epoch: int,
    max_bytes: int,
    max_wait_ms: int,
) -> Response | Deferred:
    replica_manager = ctx.node.replica_manager
    version = ctx.api_version
    last_fetched = {
        (topic_data.name, p.partition): getattr(p, "last_fetched_epoch", -1)
        for (topic_data, _), topic in zip(topics, request.topics, strict=True)
        for p in topic.partitions
    }
    log_starts = {
        (topic_data.name, p.partition): getattr(p, "log_start_offset", -1)
        for (topic_data, _), topic in zip(topics, request.topics, strict=True)
        for p in topic.partitions
    }
    known_high_watermarks = {  # v18 (KIP-1166)
        (topic_data.name, p.partition): getattr(p, "high_watermark", HIGH_WATERMARK_NOT_SENT)
        for (topic_data, _), topic in zip(topics, request.topics, strict=True)
        for p in topic.partitions
    }

    def behind(tp: TopicPartition, high_watermark: int) -> bool:
        """The follower knows an older high watermark than `high_watermark`."""
        known = known_high_watermarks.get((tp.topic, tp.partition), HIGH_WATERMARK_NOT_SENT)
        return high_watermark > known

    def collect() -> tuple[list[FetchTopicData], int, bool]:
        total = 0
        answered = False
        result = []
        for topic_data, fetches in topics:
            partitions = []
            for fetch in fetches:
                if fetch.tp is None:
                    partitions.append(FetchPartitionData(fetch.index, fetch.error, records=b""))
                    answered = True
                    continue
                read = replica_manager.read_for_follower(
                    fetch.tp,
                    replica_id,
                    fetch_offset=fetch.fetch_offset,
                    last_fetched_epoch=last_fetched.get((fetch.tp.topic, fetch.tp.partition), -1),
                    current_leader_epoch=fetch.current_leader_epoch,
                    max_bytes=min(fetch.max_bytes, max_bytes - total),
                    min_one_message=total == 0,
                    broker_epoch=replica_epoch,
                    log_start_offset=log_starts.get((fetch.tp.topic, fetch.tp.partition), -1),
                )
                size = records_size(read.records)
                total += size
                answered = (
                    answered
                    or bool(size)
                    or bool(read.error_code)
                    or bool(read.diverging_epoch)
                    or behind(fetch.tp, read.high_watermark)
                )
                partitions.append(
                    FetchPartitionData(
                        fetch.tp.partition,
                        read.error_code,
                        high_watermark=read.high_watermark,
                        last_stable_offset=read.high_watermark,
                        log_start_offset=read.log_start_offset,
                        records=read.records if not read.error_code else b"",
                        current_leader=read.current_leader,
                        diverging_epoch=read.diverging_epoch,
                    )
                )
            result.append(FetchTopicData(topic_data.name, topic_data.topic_id, partitions))
        return result, total, answered

    def respond(result: list[FetchTopicData]) -> Response:
        return _respond(ctx, version, result)

    result, _total, answered = collect()
    if answered or max_wait_ms <= 0:
        return respond(result)
    answer = Deferred()

    def done(_ready: bool) -> None:
        try:
            answer.resolve(respond(collect()[0]))
        except Exception as exc:
            answer.fail(exc)

    def ready() -> bool:
        for _, fetches in topics:
            for fetch in fetches:
                tp = fetch.tp
                partition = replica_manager.get_partition(tp) if tp else None
                if tp is None or partition is None or not partition.is_leader:
                    return True
                if behind(tp, partition.log.high_watermark):
                    return True
                # (a throttled replica's new data waits for the quota: Kafka's DelayedFetch)
                if partition.log.log_end_offset > fetch.fetch_offset and not (
                    replica_manager.leader_throttles(tp, replica_id)
                ):
                    return True
        return False

    keys = [f.tp for _, fetches in topics for f in fetches if f.tp is not None]
    replica_manager.watch_for_data(keys, ready, max_wait_ms, done)
    return answer
