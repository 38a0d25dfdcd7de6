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

Topics that make the broker read records (compacted ones, a `compression.type` to recompress to)
share one `DecodeBudget` per request: its batches together read at most 16 times what its bytes
hold uncompressed, plus one batch, so no request costs the event loop much more than it carried.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

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
from moldau.protocol.batch_layout import HEADER_SIZE
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader
from moldau.storage import DecodeBudget
from moldau.types import TopicPartition

_ZERO_UUID = uuid.UUID(int=0)
TRANSACTION_STATE_TOPIC = "__transaction_state"
VERIFICATION_TIMEOUT_S = 30.0

log = logging.getLogger(__name__)


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
    unverified: list[_Unverified] = []  # waiting for a coordinator on another broker
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
                    producer = _verify_transaction(
                        node, tp, records, transactional_id, add=ctx.api_version >= 12
                    )
                    if producer is not None:
                        unverified.append(_Unverified(response, tp, records, *producer))
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
        assert transactional_id is not None
        return _verify_remotely_then_append(
            ctx, request, transactional_id, unverified, responses, durable_waits, redirects
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
    if durable_waits:
        timeout_s = max(millis(request.timeout), 0) / 1000.0
        return _when_durable(ctx.node.replica_manager, durable_waits, timeout_s, body)
    return body


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


def node_endpoints(ctx: RequestContext, node_ids: set[int]) -> list[dict[str, Any]]:
    """Each broker of `node_ids` with its endpoint on the request's listener (KIP-951)."""
    return [
        broker
        for broker in ctx.node.broker_endpoints(ctx.listener_name)
        if broker["node_id"] in node_ids
    ]


# Verification errors a producer is told to retry (Kafka: NOT_ENOUGH_REPLICAS, retriable for
# every client version) rather than a coordinator error a Produce answer cannot carry.
_RETRY_VERIFICATION = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
        ErrorCode.request_timed_out,
    }
)


def _verification_error(code: int) -> ErrorCode:
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code in _RETRY_VERIFICATION:
        return ErrorCode.not_enough_replicas
    return ErrorCode(code)


def _verify_transaction(
    node: Any, tp: TopicPartition, records: Any, transactional_id: str, *, add: bool
) -> tuple[int, int] | None:
    """KIP-890 part 1: the first transactional batch of a producer on a partition is accepted
    only if the partition was added to the producer's ongoing transaction (no hanging
    transactions from late or zombie writes). Checked here when this node coordinates the id
    (KafkaError if refused); otherwise (producer id, epoch) to ask the coordinator's broker.
    With `add` (part 2), (producer id, epoch) to add the partition to the transaction, which
    writes to the coordinator's log wherever it is."""
    runtime = node.transaction_coordinator
    if runtime is None or len(records) < HEADER_SIZE:
        return None
    header = BatchHeader.parse(records)
    if not header.is_transactional:
        return None
    producer_id, producer_epoch = header.producer_id, header.producer_epoch
    partition = node.replica_manager.get_partition(tp)
    if partition is None or not partition.is_leader:
        return None  # (the append answers NOT_LEADER_OR_FOLLOWER)
    entry = partition.log.producer_state.producers.get(producer_id)
    if (
        entry is not None
        and entry.current_txn_first_offset >= 0
        and entry.producer_epoch == producer_epoch
    ):
        return None
    if add or not runtime.is_coordinator_for(transactional_id):
        return producer_id, producer_epoch
    code = _verification_error(
        runtime.verify_partition(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            tp=tp,
        )
    )
    if code != ErrorCode.none:
        raise KafkaError(code, f"{tp} is not in the ongoing transaction of {transactional_id!r}")
    return None


@dataclass(slots=True)
class _Unverified:
    """A partition's batches held back until the transaction coordinator confirms them."""

    response: dict[str, Any]
    tp: TopicPartition
    records: Any
    producer_id: int
    producer_epoch: int


async def _verify_remotely_then_append(
    ctx: RequestContext,
    request: Any,
    transactional_id: str,
    unverified: list[_Unverified],
    responses: list[dict[str, Any]],
    durable_waits: list[tuple[dict[str, Any], TopicPartition, int]],
    redirects: set[int],
) -> dict[str, Any] | Deferred | None:
    """KIP-890 across brokers: ask the broker coordinating `transactional_id` to verify that
    the held-back partitions are in the producer's ongoing transaction (part 1) or to add them
    (part 2, Produce v12+), append those that are, then answer as usual. The produce is applied
    in order (`in_order`): the connection's next requests wait until these appends are done,
    not for an acks=all answer's flush (a `Deferred`)."""
    node = ctx.node
    add = ctx.api_version >= 12
    by_producer: dict[tuple[int, int], list[_Unverified]] = {}
    for item in unverified:
        by_producer.setdefault((item.producer_id, item.producer_epoch), []).append(item)
    outcomes = await asyncio.gather(
        *(
            add_or_verify(node, transactional_id, pid, epoch, [i.tp for i in items], add=add)
            for (pid, epoch), items in by_producer.items()
        )
    )
    codes: dict[TopicPartition, ErrorCode] = {}
    for outcome in outcomes:
        codes.update(outcome)
    image = node.metadata_image
    decode_budget = DecodeBudget()
    for item in unverified:
        code = codes.get(item.tp, ErrorCode.invalid_txn_state)
        if code != ErrorCode.none:
            item.response["error_code"] = code
            item.response["error_message"] = (
                f"{item.tp} is not verified in the ongoing transaction of {transactional_id!r}"
            )
            continue
        last_offset = _append(
            node.replica_manager,
            image,
            item.tp,
            item.records,
            request.acks,
            decode_budget,
            item.response,
            redirects,
        )
        if request.acks == -1 and last_offset is not None:
            durable_waits.append((item.response, item.tp, last_offset))
    return _answer(ctx, request, responses, durable_waits, redirects)


async def add_or_verify(
    node: Any,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    *,
    add: bool,
    error_of: Callable[[int], ErrorCode] = _verification_error,
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's error (NONE: it is in the producer's ongoing transaction, added there
    first with `add`), from this node's transaction coordinator when it coordinates
    `transactional_id`, else from the broker that does; `error_of` turns the coordinator's
    answer into the caller's error (produce's by default)."""
    runtime = node.transaction_coordinator
    if not runtime.is_coordinator_for(transactional_id):
        return await ask_transaction_coordinator(
            node,
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            verify_only=not add,
            error_of=error_of,
        )
    if not add:
        return {
            tp: error_of(
                runtime.verify_partition(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    tp=tp,
                )
            )
            for tp in partitions
        }
    try:
        answer = await runtime.add_partitions(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=partitions,
        )
    except KafkaError as error:
        return dict.fromkeys(partitions, error_of(error.code))
    return {tp: error_of(answer["partitions"].get(tp, answer["error_code"])) for tp in partitions}


async def ask_transaction_coordinator(
    node: Any,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    *,
    verify_only: bool = True,
    error_of: Callable[[int], ErrorCode] = _verification_error,
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's error (NONE if it is in the ongoing transaction), asked of the broker
    coordinating `transactional_id` (AddPartitionsToTxn v4) to verify (`verify_only`) or to add
    the partitions; `error_of` turns the coordinator's answer into the caller's error (produce's
    by default)."""
    runtime = node.transaction_coordinator
    state = node.metadata_image.topics.get(TRANSACTION_STATE_TOPIC)
    index = runtime.partition_for(transactional_id)
    known = state.partitions.get(index) if state is not None else None
    if known is None or known.leader < 0:
        return dict.fromkeys(partitions, error_of(ErrorCode.coordinator_not_available))
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    try:
        connection = await node.broker_connection(known.leader)
        response = await connection.request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            {
                "transactions": [
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "verify_only": verify_only,
                        "topics": [
                            {"name": name, "partitions": indexes}
                            for name, indexes in topics.items()
                        ],
                    }
                ]
            },
            version=4,
            timeout=VERIFICATION_TIMEOUT_S,
        )
    except Exception as error:  # the coordinator's broker is away: the producer retries
        node.forget_broker_connection(known.leader)
        log.info("verifying %r with broker %d failed: %r", transactional_id, known.leader, error)
        return dict.fromkeys(partitions, error_of(ErrorCode.network_exception))
    if response.error_code:
        return dict.fromkeys(partitions, error_of(response.error_code))
    codes = dict.fromkeys(partitions, ErrorCode.invalid_txn_state)
    for result in response.results_by_transaction:
        for topic in result.topic_results:
            for answer in topic.results_by_partition:
                tp = TopicPartition(topic.name, int(answer.partition_index))
                if tp in codes:
                    codes[tp] = error_of(answer.partition_error_code)
    return codes


def _when_durable(
    replica_manager: Any,
    waits: list[tuple[dict[str, Any], TopicPartition, int]],
    timeout_s: float,
    body: dict[str, Any],
) -> Deferred:
    """`body`, resolved once every partition in `waits` is replicated and durable or the timeout
    passes.

    Partitions still waiting at the timeout answer REQUEST_TIMED_OUT (their records stay in the
    log, as in Kafka); a failed flush answers its error code.
    """
    answer = Deferred()
    pending = set(range(len(waits)))
    timer: asyncio.TimerHandle | None = None

    def settled(index: int, error: BaseException | None) -> None:
        if answer.resolved:  # timed out before this partition was durable
            return
        if error is not None:
            waits[index][0]["error_code"] = (
                error.code if isinstance(error, KafkaError) else ErrorCode.kafka_storage_error
            )
        pending.discard(index)
        if not pending:
            if timer is not None:
                timer.cancel()
            answer.resolve(body)

    def timed_out() -> None:
        for index in pending:
            waits[index][0]["error_code"] = ErrorCode.request_timed_out
        answer.resolve(body)

    if timeout_s > 0:
        timer = asyncio.get_running_loop().call_later(timeout_s, timed_out)
    for index, (_, tp, last_offset) in enumerate(waits):
        partition = replica_manager.get_partition(tp)
        min_insync = partition.log.config.min_insync_replicas if partition is not None else 1
        replica_manager.when_replicated(
            tp, last_offset, lambda e, i=index: settled(i, e), min_insync=min_insync
        )
    return answer
