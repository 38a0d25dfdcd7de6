"""Writing a transaction's markers, Kafka's `TransactionMarkerChannelManager` (the coordinator's
side) with the leader's `ReplicaManager.appendRecords(origin=COORDINATOR)`.

The transaction coordinator calls `write_markers`: markers of partitions this broker leads are
appended here, the others sent with WriteTxnMarkers to each partition's leader (which appends
only what it leads). A marker is a control batch appended with `AppendOrigin.COORDINATOR`
(fenced by producer epoch and coordinator epoch in storage) through
`ReplicaManager.append_records`, and counts once it is replicated to the ISR, as an acks=all
write. A marker for `__consumer_offsets` goes through the group coordinator, which makes the
transaction's pending offsets take effect (or drops them) and writes the marker after its earlier
writes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from moldau.coordinator.runtime import OFFSETS_TOPIC
from moldau.coordinator.transaction_metadata import MarkerRequest
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import ControlRecordType, build_control_batch
from moldau.storage import AppendOrigin
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices


def _append_marker(node: BrokerServices, tp: TopicPartition, batch: bytes) -> int:
    """Append now (no await); returns the marker's offset."""
    result = node.replica_manager.append_records(
        tp, batch, required_acks=1, origin=AppendOrigin.COORDINATOR
    )
    return int(result.last_offset)


async def _replicated(node: BrokerServices, tp: TopicPartition, offset: int) -> None:
    await node.replica_manager.wait_replicated(tp, offset)


async def _write_one(
    node: BrokerServices, tp: TopicPartition, markers: MarkerRequest, epoch: int
) -> int:
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
                await _replicated(node, tp, offset)

            await node.group_coordinator.complete_transaction(
                tp.partition,
                producer_id=markers.producer_id,
                committed=markers.committed,
                write_marker=write_marker,
            )
        else:
            offset = _append_marker(node, tp, batch)
            await _replicated(node, tp, offset)
    except KafkaError as error:
        return int(error.code)
    return int(ErrorCode.none)


async def write_markers(
    node: BrokerServices, markers: MarkerRequest, coordinator_epoch: int, *, forward: bool = True
) -> dict[TopicPartition, int]:
    """Write the markers of one transaction to each of its partitions; error code per partition.
    With `forward`, partitions another broker leads get theirs through that broker."""
    local: list[TopicPartition] = []
    remote: dict[int, list[TopicPartition]] = {}
    image = node.metadata_image
    for tp in markers.partitions:
        topic = image.topics.get(tp.topic)
        partition = topic.partitions.get(tp.partition) if topic is not None else None
        leader = partition.leader if partition is not None else -1
        if not forward or leader in (node.node_id, -1) or partition is None:
            local.append(tp)
        else:
            remote.setdefault(leader, []).append(tp)
    jobs: list[Any] = [_write_one(node, tp, markers, coordinator_epoch) for tp in local]
    jobs.extend(
        _send_to_leader(node, leader, markers, partitions, coordinator_epoch)
        for leader, partitions in remote.items()
    )
    results = await asyncio.gather(*jobs)
    codes: dict[TopicPartition, int] = dict(zip(local, results[: len(local)], strict=True))
    for answer in results[len(local) :]:
        codes.update(answer)
    return codes


async def _send_to_leader(
    node: BrokerServices,
    leader: int,
    markers: MarkerRequest,
    partitions: list[TopicPartition],
    coordinator_epoch: int,
) -> dict[TopicPartition, int]:
    """WriteTxnMarkers to the broker leading `partitions`; its error code for each."""
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    try:
        connection = await node.broker_connection(leader)
        response = await connection.request(
            ApiKey.WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": markers.producer_id,
                        "producer_epoch": markers.producer_epoch,
                        "transaction_result": markers.committed,
                        "topics": [
                            {"name": name, "partition_indexes": indexes}
                            for name, indexes in topics.items()
                        ],
                        "coordinator_epoch": coordinator_epoch,
                        "transaction_version": markers.transaction_version,
                    }
                ]
            },
        )
    except Exception as error:  # the runtime retries: the leader may be moving
        node.forget_broker_connection(leader)
        code = error.code if isinstance(error, KafkaError) else ErrorCode.not_leader_or_follower
        return dict.fromkeys(partitions, int(code))
    codes = dict.fromkeys(partitions, int(ErrorCode.not_leader_or_follower))
    for marker in response.markers:
        for topic in marker.topics:
            for answer in topic.partitions:
                codes[TopicPartition(topic.name, int(answer.partition_index))] = int(
                    answer.error_code
                )
    return codes
