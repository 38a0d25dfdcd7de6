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

from moldau.broker.handlers.produce import node_endpoints
from moldau.broker.registry import RequestContext, Response, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.fetch_response import (
    FetchPartitionData,
    FetchTopicData,
    encode_fetch_response,
)
from moldau.raft.messages import HIGH_WATERMARK_NOT_SENT
from moldau.types import TopicPartition

_ZERO_UUID = uuid.UUID(int=0)


class _PartitionFetch:
    """One partition asked for. `tp` is None when it is not read: `error` says why (an
    unknown topic, or one the principal may not read)."""

    __slots__ = ("current_leader_epoch", "error", "fetch_offset", "index", "max_bytes", "tp")

    def __init__(
        self,
        tp: TopicPartition | None,
        index: int,
        fetch_offset: int,
        max_bytes: int,
        epoch: int,
        error: ErrorCode = ErrorCode.none,
    ) -> None:
        self.tp = tp
        self.index = index
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = epoch
        self.error = error


@handler(ApiKey.FETCH, 4, 18)
def handle_fetch(ctx: RequestContext, request: Any) -> Response | Deferred:
    node = ctx.node
    image = node.metadata_image
    version = ctx.api_version
    isolation_level = getattr(request, "isolation_level", 0)
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)
    min_bytes = request.min_bytes
    max_wait_ms = max(millis(request.max_wait), 0)

    topics: list[tuple[FetchTopicData, list[_PartitionFetch]]] = []
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
            _PartitionFetch(
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

    replica_manager = node.replica_manager
    if replica_id >= 0:
        return _replica_fetch(
            ctx, request, topics, replica_id, replica_epoch, max_bytes, max_wait_ms
        )
    if ctx.quota is not None:  # a consumer under consumer_byte_rate (moldau.broker.quotas)
        max_bytes = ctx.quota.fetch_max_bytes(max_bytes)
    # KIP-392: from v11 a consumer may read a follower (up to its high watermark), and a leader
    # may send a consumer in another rack to a replica in its own (`client.rack`).
    followers = version >= 11
    rack = getattr(request, "rack_id", "") or ""
    if replica_manager.rack_of is None:
        rack = ""  # no rack-aware selector: every consumer reads where it asks

    def collect() -> tuple[list[FetchTopicData], int, bool]:
        total = 0
        errors = False
        result = []
        for topic_data, fetches in topics:
            partitions = []
            for fetch in fetches:
                remaining = max_bytes - total
                data = _read_partition(
                    replica_manager,
                    fetch,
                    isolation_level,
                    remaining,
                    total == 0,
                    version,
                    rack,
                    image,
                )
                if data.error_code or data.preferred_read_replica >= 0:
                    errors = True  # an answer to send now
                else:
                    total += _size(data.records)
                partitions.append(data)
            result.append(FetchTopicData(topic_data.name, topic_data.topic_id, partitions))
        return result, total, errors

    def respond(result: list[FetchTopicData]) -> Response:
        return _respond(ctx, version, result)

    # A consumer at the end of its partitions (the common fetch on a busy broker) parks at
    # once: what collect() would build now is empty, and it runs when the fetch is answered.
    if (
        max_wait_ms <= 0
        or min_bytes <= 0
        or rack  # (a leader may have to send it elsewhere)
        or not _all_at_end(replica_manager, topics, isolation_level, followers)
    ):
        result, total, errors = collect()
        if total >= min_bytes or errors or max_wait_ms <= 0:
            return respond(result)

    # Not enough yet: park until an append makes `min_bytes` ready or `max_wait_ms` passes. The
    # answer is read and sent from the appending request's call chain (see Purgatory).
    answer = Deferred()

    def done(_ready: bool) -> None:
        try:
            answer.resolve(respond(collect()[0]))
        except Exception as exc:  # answered by the dispatcher (UNKNOWN_SERVER_ERROR or close)
            answer.fail(exc)

    def ready() -> bool:
        available = _bytes_available(replica_manager, topics, isolation_level, min_bytes, followers)
        return bool(available >= min_bytes)

    keys = [f.tp for _, fetches in topics for f in fetches if f.tp is not None]
    replica_manager.watch_for_data(keys, ready, max_wait_ms, done)
    return answer


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


def replica_of(request: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's fetch; (-1, -1) for a consumer's."""
    state = getattr(request, "replica_state", None)
    if state is not None and int(state.replica_id) >= 0:
        return int(state.replica_id), int(state.replica_epoch)
    return int(getattr(request, "replica_id", -1)), -1


def _replica_fetch(
    ctx: RequestContext,
    request: Any,
    topics: list[tuple[FetchTopicData, list[_PartitionFetch]]],
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
                    partitions.append(_read_partition(replica_manager, fetch, 0, 0, False, version))
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
                size = _size(read.records)
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


def _size(records: Any) -> int:
    if records is None:
        return 0
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    return sum(region.length for region in records)


def _read_partition(
    replica_manager: Any,
    fetch: _PartitionFetch,
    isolation_level: int,
    remaining: int,
    min_one_message: bool,
    version: int,
    rack: str = "",
    image: Any = None,
) -> FetchPartitionData:
    index = fetch.index
    if fetch.tp is None:
        return FetchPartitionData(index, int(fetch.error), records=b"")
    try:
        partition = replica_manager.readable_partition(
            fetch.tp, fetch.current_leader_epoch, allow_follower=version >= 11
        )
    except KafkaError as exc:
        code = exc.code
        topic = image.topics.get(fetch.tp.topic) if image is not None else None
        known = topic.partitions.get(fetch.tp.partition) if topic is not None else None
        if code == ErrorCode.unknown_topic_or_partition and known is not None:
            code = ErrorCode.not_leader_or_follower  # it exists, on other brokers (as Kafka)
        # An error carries an empty record set, never a null one: librdkafka 2.0 refuses the
        # whole response on a null one (and never applies auto.offset.reset).
        data = FetchPartitionData(index, int(code), records=b"")
        if code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
            current = replica_manager.get_partition(fetch.tp)
            if current is not None and current.leader_id >= 0:
                data.current_leader = (current.leader_id, current.leader_epoch)
            elif known is not None and known.leader >= 0:  # not a replica here
                data.current_leader = (known.leader, known.leader_epoch)
        return data
    log = partition.log
    high_watermark = log.high_watermark
    last_stable_offset = log.last_stable_offset
    upper = last_stable_offset if isolation_level == 1 else high_watermark
    data = FetchPartitionData(
        index,
        0,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=log.log_start_offset,
        aborted_transactions=[] if isolation_level == 1 else None,
    )
    if rack and partition.is_leader:
        preferred = replica_manager.preferred_read_replica(partition, fetch.fetch_offset, rack)
        if preferred >= 0:  # read there: nothing from here
            data.preferred_read_replica = preferred
            data.records = b""
            return data
    end = log.log_end_offset
    if upper <= fetch.fetch_offset <= end or (
        # A consumer that names no leader epoch and reached a follower ahead of it (stale
        # metadata) gets nothing and retries, not OFFSET_OUT_OF_RANGE (as Kafka since 3.4).
        fetch.fetch_offset > end and not partition.is_leader and fetch.current_leader_epoch < 0
    ):
        data.records = b""
        return data
    limit = min(fetch.max_bytes, remaining)
    try:
        read = log.read(
            fetch.fetch_offset,
            max_bytes=max(limit, 0),
            max_offset=upper,
            min_one_message=min_one_message,
        )
    except KafkaError as exc:
        data.error_code = int(exc.code)
        data.records = b""
        return data
    data.records = list(read.regions)
    if isolation_level == 1 and data.records:
        end = getattr(read, "next_offset", None) or upper
        data.aborted_transactions = [
            (aborted.producer_id, aborted.first_offset)
            for aborted in log.aborted_transactions(fetch.fetch_offset, end)
        ]
    return data


def _all_at_end(
    replica_manager: Any,
    topics: list[tuple[FetchTopicData, list[_PartitionFetch]]],
    isolation: int,
    followers: bool,
) -> bool:
    """True if every partition asked for is readable here (led, or followed when `followers`),
    fetched at its bound (the high watermark, or the last stable offset for read_committed) and
    so has nothing to return and no error."""
    partitions = replica_manager.partitions
    for _, fetches in topics:
        for fetch in fetches:
            partition = partitions.get(fetch.tp) if fetch.tp is not None else None
            if partition is None or not (partition.is_leader or followers):
                return False
            epoch = fetch.current_leader_epoch
            if epoch >= 0 and epoch != partition.leader_epoch:
                return False
            log = partition.log
            upper = log.last_stable_offset if isolation == 1 else log.high_watermark
            if fetch.fetch_offset != upper or upper > log.log_end_offset:
                return False
    return True


def _bytes_available(
    replica_manager: Any,
    topics: list[tuple[FetchTopicData, list[_PartitionFetch]]],
    isolation: int,
    min_bytes: int,
    followers: bool,
) -> int:
    """A lower bound of the bytes a fetch would return now. For min_bytes <= 1 (what most
    clients send) any new offset below the bound is enough, and nothing is read."""
    available = 0
    for _, fetches in topics:
        for fetch in fetches:
            if fetch.tp is None:
                continue
            partition = replica_manager.get_partition(fetch.tp)
            if partition is None or partition.leader_id < 0:
                return 1 << 30  # an error is an answer: stop waiting
            if not (partition.is_leader or followers):
                return 1 << 30
            log = partition.log
            upper = log.last_stable_offset if isolation == 1 else log.high_watermark
            if upper > fetch.fetch_offset:
                if min_bytes <= 1:
                    return 1
                try:
                    read = log.read(
                        fetch.fetch_offset,
                        max_bytes=fetch.max_bytes,
                        max_offset=upper,
                        min_one_message=True,
                    )
                except KafkaError:
                    return 1 << 30
                available += sum(region.length for region in read.regions)
            elif (
                fetch.fetch_offset > log.log_end_offset or fetch.fetch_offset < log.log_start_offset
            ):
                return 1 << 30
    return available
