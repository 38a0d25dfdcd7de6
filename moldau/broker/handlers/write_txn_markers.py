"""WriteTxnMarkers (key 27), v1-2: write COMMIT or ABORT markers of a transaction to partitions.

v1 is the first flexible version (Kafka 4 removed v0); v2 adds transaction_version (KIP-890).
The transaction coordinator calls `write_markers` directly; the API is the same path, for
brokers and for tools. A marker is a control batch appended with `AppendOrigin.COORDINATOR`
(fenced by producer epoch and coordinator epoch in storage). A marker for `__consumer_offsets`
goes through the group coordinator, which makes the transaction's pending offsets take effect
(or drops them) and writes the marker after its earlier writes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from moldau.broker.registry import RequestContext, handler
from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.coordinator.transaction_metadata import MarkerRequest
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import ControlRecordType, build_control_batch
from moldau.storage import AppendOrigin
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.node import Node


def _append_marker(node: Node, tp: TopicPartition, batch: bytes) -> int:
    """Append now (no await); returns the marker's offset."""
    replica_manager = node.replica_manager
    partition = replica_manager.leader_partition(tp)
    result = partition.log.append_as_leader(
        batch, leader_epoch=partition.leader_epoch, origin=AppendOrigin.COORDINATOR
    )
    partition.maybe_advance_high_watermark()
    replica_manager.fetch_purgatory.wake(tp)
    return int(result.last_offset)


async def _write_one(node: Node, tp: TopicPartition, markers: MarkerRequest, epoch: int) -> int:
    batch = build_control_batch(
        ControlRecordType.COMMIT if markers.committed else ControlRecordType.ABORT,
        producer_id=markers.producer_id,
        producer_epoch=markers.producer_epoch,
        coordinator_epoch=epoch,
        timestamp=node.clock.now_ms(),
    )
    try:
        if tp.topic == OFFSETS_TOPIC and node.group_coordinator is not None:

            async def write_marker() -> None:
                offset = _append_marker(node, tp, batch)
                await node.replica_manager.wait_durable(tp, offset)

            await node.group_coordinator.complete_transaction(
                tp.partition,
                producer_id=markers.producer_id,
                committed=markers.committed,
                write_marker=write_marker,
            )
        else:
            offset = _append_marker(node, tp, batch)
            await node.replica_manager.wait_durable(tp, offset)
    except KafkaError as error:
        return int(error.code)
    return int(ErrorCode.none)


async def write_markers(
    node: Node, markers: MarkerRequest, coordinator_epoch: int
) -> dict[TopicPartition, int]:
    """Write the markers of one transaction to each of its partitions; error code per partition."""
    partitions = list(markers.partitions)
    codes = await asyncio.gather(
        *(_write_one(node, tp, markers, coordinator_epoch) for tp in partitions)
    )
    return dict(zip(partitions, codes, strict=True))


@handler(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    answers = []
    for marker in request.markers:
        partitions = tuple(
            TopicPartition(topic.name, index)
            for topic in marker.topics
            for index in topic.partition_indexes
        )
        codes = await write_markers(
            ctx.node,
            MarkerRequest(
                transactional_id="",
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                committed=marker.transaction_result,
                partitions=partitions,
                transaction_version=getattr(marker, "transaction_version", 0),
            ),
            marker.coordinator_epoch,
        )
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": codes[tp]}
            )
        answers.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            }
        )
    return {"markers": answers}
