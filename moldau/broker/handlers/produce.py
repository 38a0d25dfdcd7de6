"""Produce (key 0), v3-13 served; v0-2 advertised but refused, as Kafka 4 does (KIP-896).

v3 adds the transactional id (record batches v2 only); v5 log_start_offset; v8 record_errors and
error_message; v9 flexible; v10-11 current_leader/node_endpoints tags (KIP-951); v12 is for
clients of transaction version 2 (KIP-890 part 2): a transactional batch for a partition not yet
in the producer's transaction adds it (the leader asks the transaction coordinator, as the client
asked with AddPartitionsToTxn before), where v11 and older only verify that it is in (KIP-890
part 1); v13 uses topic ids.

acks=0 sends no response; acks=1 answers once the batches are in the leader's page cache;
acks=-1 once they are below the high watermark (every ISR member has them, fsynced: followers
report only flushed offsets) and fsynced here (group commit), with NOT_ENOUGH_REPLICAS before the
append when the ISR is smaller than `min.insync.replicas` and NOT_ENOUGH_REPLICAS_AFTER_APPEND
when it shrank below it meanwhile.

The handler is a plain function, not a coroutine: acks=0/1 answer in the same call, and acks=-1
returns a `Deferred` that the flush's completion resolves through callbacks. A produce request is
the one request a busy broker sees thousands of times a second, and a task per request plus the
loop iterations its futures wait for were a measurable share of its latency. Only a transactional
batch whose partition is not yet in the producer's transaction makes it a coroutine (the
coordinator must verify or add the partition first); Produce is applied in order (`in_order`),
so the connection's later requests wait until that coroutine has appended: pipelined batches of
one producer reach the log in the order they were sent, as Kafka's one-request-at-a-time
channels guarantee.

What the leader does with the batches is replication's: `ReplicaManager.append_records`, the
KIP-890 verification (`replication.transaction_verification`, through the node's link to the
transaction coordinator) and the acks=all wait (`ReplicaManager.when_acknowledged`, Kafka's
DelayedProduce); this module decodes, authorizes, calls them and encodes.

Topics that make the broker read records (compacted ones, a `compression.type` to recompress to)
share one `DecodeBudget` per request: its batches together read at most 16 times what its bytes
hold uncompressed, plus one batch, so no request costs the event loop much more than it carried.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from moldau.broker.handlers._redirects import node_endpoints
from moldau.broker.registry import RequestContext, handler
from moldau.controller.topic_names import (
    INTERNAL_TOPICS,
    INTERNAL_TOPICS_MODIFICATION,
    refuse_internal_topic_change,
)
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import millis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication import transaction_verification as verification
from moldau.storage import DecodeBudget
from moldau.types import TopicPartition

_ZERO_UUID = uuid.UUID(int=0)


@handler(ApiKey.PRODUCE, 3, 13, advertised_min_version=0, in_order=True)
def handle_produce(
    ctx: RequestContext, request: Any
) -> dict[str, Any] | Deferred | Awaitable[dict[str, Any] | Deferred | None] | None:
    node = ctx.node
    acks = request.acks
    replica_manager = node.replica_manager
    image = node.metadata_image
    responses = []
    durable_waits: list[tuple[dict[str, Any], TopicPartition, int]] = []
    decode_budget = DecodeBudget()
    redirects: set[int] = set()  # leaders named in answers (KIP-951)
    if acks not in (0, 1, -1):
        code = ErrorCode.invalid_required_acks
    else:
        code = ErrorCode.none
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is not None and not ctx.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        code = ErrorCode.transactional_id_authorization_failed
    link = node.transaction_link
    add = ctx.api_version >= 12
    unverified: list[_Unverified] = []  # waiting for the transaction coordinator
    for topic in request.topic_data:
        name = getattr(topic, "name", None)
        topic_id = getattr(topic, "topic_id", None)
        if not name and topic_id is not None:
            found = image.topics_by_id.get(topic_id)
            name = found.name if found is not None else None
        # (authorization comes before existence: an unknown topic is not revealed)
        topic_code = code
        if (
            topic_code == ErrorCode.none
            and name is not None
            and not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, name)
        ):
            topic_code = ErrorCode.topic_authorization_failed
        partition_responses = []
        for partition_data in topic.partition_data:
            response: dict[str, Any] = {
                "index": partition_data.index,
                "error_code": topic_code,
                "base_offset": -1,
                "log_append_time": -1,
                "log_start_offset": -1,
            }
            partition_responses.append(response)
            if topic_code != ErrorCode.none:
                continue
            if name is None:
                response["error_code"] = (
                    ErrorCode.unknown_topic_id if topic_id else ErrorCode.unknown_topic_or_partition
                )
                continue
            tp = TopicPartition(name, partition_data.index)
            records = partition_data.records
            try:
                if records is None or len(records) == 0:
                    raise KafkaError(ErrorCode.corrupt_message, "no record batch")
                if name in INTERNAL_TOPICS and not node.config.get(INTERNAL_TOPICS_MODIFICATION):
                    # the coordinators' logs: theirs alone, with Kafka's code
                    raise refuse_internal_topic_change(
                        name, "append to", ErrorCode.invalid_topic_exception
                    )
                if transactional_id is not None:
                    pending = verification.check(
                        link,
                        replica_manager.get_partition(tp),
                        tp,
                        records,
                        transactional_id,
                        add=add,
                    )
                    if pending is not None:
                        unverified.append(_Unverified(response, records, pending))
                        continue
            except KafkaError as exc:
                _refused(image, tp, response, exc, redirects)
                continue
            last_offset = _append(
                replica_manager, image, tp, records, acks, decode_budget, response, redirects
            )
            if acks == -1 and last_offset is not None:
                durable_waits.append((response, tp, last_offset))
        responses.append(
            {"name": name or "", "topic_id": topic_id, "partition_responses": partition_responses}
        )
    if unverified:
        assert transactional_id is not None and link is not None
        return _verify_then_append(
            ctx, request, link, transactional_id, unverified, responses, durable_waits, redirects
        )
    return _answer(ctx, request, responses, durable_waits, redirects)


def _answer(
    ctx: RequestContext,
    request: Any,
    responses: list[dict[str, Any]],
    durable_waits: list[tuple[dict[str, Any], TopicPartition, int]],
    redirects: set[int],
) -> dict[str, Any] | Deferred | None:
    if request.acks == 0:
        return None
    body: dict[str, Any] = {"responses": responses, "throttle_time": 0}
    if redirects:
        body["node_endpoints"] = node_endpoints(ctx, redirects)
    if not durable_waits:
        return body
    answer = Deferred()

    def acknowledged(codes: list[int]) -> None:
        for (response, _tp, _offset), code in zip(durable_waits, codes, strict=True):
            if code:
                response["error_code"] = code
        answer.resolve(body)

    ctx.node.replica_manager.when_acknowledged(
        [(tp, offset) for _response, tp, offset in durable_waits],
        max(millis(request.timeout), 0) / 1000.0,
        acknowledged,
    )
    return answer


def _append(
    replica_manager: Any,
    image: Any,
    tp: TopicPartition,
    records: Any,
    acks: int,
    decode_budget: DecodeBudget,
    response: dict[str, Any],
    redirects: set[int],
) -> int | None:
    """Append one partition's batches as leader and fill its answer; the last offset appended
    (for an acks=all wait), None if refused."""
    try:
        result = replica_manager.append_records(
            tp, records, required_acks=acks, decode_budget=decode_budget
        )
    except KafkaError as exc:
        _refused(image, tp, response, exc, redirects)
        return None
    response["base_offset"] = result.first_offset
    response["log_append_time"] = result.log_append_time
    response["log_start_offset"] = result.log_start_offset
    return int(result.last_offset)


def _refused(
    image: Any, tp: TopicPartition, response: dict[str, Any], exc: KafkaError, redirects: set[int]
) -> None:
    code = exc.code
    if code == ErrorCode.unknown_topic_or_partition and _exists(image, tp):
        code = ErrorCode.not_leader_or_follower  # hosted by other brokers
    response["error_code"] = code
    response["error_message"] = exc.message
    if code in _LEADER_MOVED:
        _point_to_leader(image, tp, response, redirects)


_LEADER_MOVED = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def _exists(image: Any, tp: TopicPartition) -> bool:
    topic = image.topics.get(tp.topic)
    return topic is not None and tp.partition in topic.partitions


def _point_to_leader(
    image: Any, tp: TopicPartition, response: dict[str, Any], redirects: set[int]
) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER names its current leader (and the
    answer that leader's endpoint), so the client skips a metadata round trip."""
    topic = image.topics.get(tp.topic)
    partition = topic.partitions.get(tp.partition) if topic is not None else None
    if partition is None or partition.leader < 0:
        return
    response["current_leader"] = {
        "leader_id": partition.leader,
        "leader_epoch": partition.leader_epoch,
    }
    redirects.add(partition.leader)


@dataclass(slots=True)
class _Unverified:
    """A partition's batches held back until the transaction coordinator answers for them."""

    response: dict[str, Any]
    records: Any
    pending: verification.PendingVerification


async def _verify_then_append(
    ctx: RequestContext,
    request: Any,
    link: verification.CoordinatorLink,
    transactional_id: str,
    unverified: list[_Unverified],
    responses: list[dict[str, Any]],
    durable_waits: list[tuple[dict[str, Any], TopicPartition, int]],
    redirects: set[int],
) -> dict[str, Any] | Deferred | None:
    """KIP-890: ask the transaction coordinator to verify that the held-back partitions are in
    the producer's ongoing transaction (part 1) or to add them (part 2, Produce v12+), append
    those that are, then answer as usual. The produce is applied in order (`in_order`): the
    connection's next requests wait until these appends are done, not for an acks=all answer's
    flush (a `Deferred`)."""
    node = ctx.node
    codes = await verification.verify(
        link, transactional_id, [item.pending for item in unverified], add=ctx.api_version >= 12
    )
    image = node.metadata_image
    decode_budget = DecodeBudget()
    for item in unverified:
        tp = item.pending.tp
        code = codes.get(tp, ErrorCode.invalid_txn_state)
        if code != ErrorCode.none:
            item.response["error_code"] = code
            item.response["error_message"] = (
                f"{tp} is not verified in the ongoing transaction of {transactional_id!r}"
            )
            continue
        last_offset = _append(
            node.replica_manager,
            image,
            tp,
            item.records,
            request.acks,
            decode_budget,
            item.response,
            redirects,
        )
        if request.acks == -1 and last_offset is not None:
            durable_waits.append((item.response, tp, last_offset))
    return _answer(ctx, request, responses, durable_waits, redirects)
