"""Wiring of the coordinators into a node: internal topics (created on first use:
`internal_topics.py`), record writes and replays.

The group coordinator runtime is given `append` (builds a batch of its key/value records, appends
it to the `__consumer_offsets` partition and waits until every ISR member has it durably: the
coordinator answers only after that, as Kafka's does with acks=all), `append_transactional` (the same in a
transactional batch of a producer, for TxnOffsetCommit) and `read_records`, which replays a
partition from its log start, transactional records and markers included. The transaction
coordinator runtime gets the same over `__transaction_state`, producer ids from the controller's
blocks and `write_markers` (`handlers/write_txn_markers.py`). A broker coordinates the partitions
of the internal topics it leads: it loads a partition when it becomes its leader and unloads it
when another broker does (each metadata image is compared with the one before).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from moldau.broker.internal_topics import InternalTopic
from moldau.broker.transaction_markers import write_markers
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime, LoadedItem
from moldau.coordinator.transaction_metadata import TransactionCoordinatorConfig
from moldau.coordinator.transaction_runtime import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinatorRuntime,
)
from moldau.coordinator.transactional_offsets import TransactionalRecord, TransactionMarker
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import (
    ControlRecordType,
    NewRecord,
    build_batch,
    iter_batches,
    parse_control_record,
)
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)

_OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
_TRANSACTION_STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "uncompressed",
}
_READ_CHUNK_BYTES = 4 * 1024 * 1024


async def start(node: BrokerServices) -> None:
    config = GroupCoordinatorConfig.from_properties(node.config)
    node.internal_topics.register(
        InternalTopic(
            OFFSETS_TOPIC,
            partitions=config.offsets_topic_num_partitions,
            configs=dict(_OFFSETS_TOPIC_CONFIGS),
            replication_factor_key="offsets.topic.replication.factor",
        )
    )

    async def append(tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]) -> int:
        return await _append(node, tp, pairs)

    async def append_transactional(
        tp: TopicPartition,
        pairs: list[tuple[bytes | None, bytes | None]],
        producer_id: int,
        producer_epoch: int,
    ) -> int:
        return await _append(node, tp, pairs, producer=(producer_id, producer_epoch))

    runtime = GroupCoordinatorRuntime(
        config,
        append=append,
        append_transactional=append_transactional,
        read_records=lambda tp: _read_offsets_records(node, tp),
        clock=node.clock,
    )
    # Published before loading, so requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
    node.group_coordinator = runtime
    transactions = await _start_transaction_coordinator(node, append)

    async def stop() -> None:
        await node.internal_topics.stop()
        if transactions is not None:
            await transactions.stop()
        await runtime.stop()

    node.on_stop(stop)
    await runtime.start(_led_partitions(node, OFFSETS_TOPIC))
    if transactions is not None:
        await transactions.start(_led_partitions(node, TRANSACTION_STATE_TOPIC))

    def follow(previous: MetadataImage | None, image: MetadataImage) -> None:
        runtime.follow_leadership(_led_partitions(node, OFFSETS_TOPIC))
        if transactions is not None:
            transactions.follow_leadership(_led_partitions(node, TRANSACTION_STATE_TOPIC))
        deleted = _deleted_topics(previous, image)
        if deleted:
            runtime.on_topics_deleted(deleted)

    node.metadata_listeners.append(follow)


def _deleted_topics(previous: MetadataImage | None, image: MetadataImage) -> set[str]:
    """Names of the topics `image` no longer has (or has as a new topic of the same name)."""
    if previous is None or previous.topics is image.topics:
        return set()
    return {
        name
        for name, topic in previous.topics.items()
        if (current := image.topics.get(name)) is None or current.topic_id != topic.topic_id
    }


def _led_partitions(node: BrokerServices, topic_name: str) -> dict[int, int]:
    """The partitions of `topic_name` this broker leads and hosts, with their leader epochs."""
    topic = node.metadata_image.topics.get(topic_name)
    if topic is None:
        return {}
    return {
        index: partition.leader_epoch
        for index, partition in topic.partitions.items()
        if partition.leader == node.node_id
        and node.replica_manager.get_partition(TopicPartition(topic_name, index)) is not None
    }


async def _start_transaction_coordinator(
    node: BrokerServices, append: object
) -> TransactionCoordinatorRuntime | None:
    config = TransactionCoordinatorConfig.from_properties(node.config)
    node.internal_topics.register(
        InternalTopic(
            TRANSACTION_STATE_TOPIC,
            partitions=config.transaction_state_log_num_partitions,
            configs=dict(_TRANSACTION_STATE_TOPIC_CONFIGS),
            replication_factor_key="transaction.state.log.replication.factor",
        )
    )

    async def append_state(
        tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]
    ) -> int:
        return await _append(node, tp, pairs)

    def coordinator_epoch(index: int) -> int:
        partition = node.replica_manager.get_partition(
            TopicPartition(TRANSACTION_STATE_TOPIC, index)
        )
        return int(partition.leader_epoch) if partition is not None else 0

    runtime = TransactionCoordinatorRuntime(
        config,
        append=append_state,
        read_records=lambda tp: _read_state_records(node, tp),
        allocate_producer_id=node.producer_id_manager.generate,
        write_markers=lambda markers, epoch: write_markers(node, markers, epoch),
        coordinator_epoch=coordinator_epoch,
        clock=node.clock,
    )
    node.transaction_coordinator = runtime
    return runtime


async def _append(
    node: BrokerServices,
    tp: TopicPartition,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    producer: tuple[int, int] | None = None,
) -> int:
    """Append before the first await (coordinators rely on it for ordering), then wait until
    the records are durable on every ISR member, as Kafka's coordinators append with acks=all:
    a state a coordinator answered with must survive its broker's failure (the next leader of
    the partition loads it)."""
    if producer is None:
        batch = build_batch(
            [NewRecord(key=key, value=value) for key, value in pairs],
            timestamp=node.clock.now_ms(),
        )
    else:
        batch = build_batch(
            [NewRecord(key=key, value=value) for key, value in pairs],
            timestamp=node.clock.now_ms(),
            producer_id=producer[0],
            producer_epoch=producer[1],
            transactional=True,
        )
    replica_manager = node.replica_manager
    result = replica_manager.append_records(tp, batch, required_acks=-1)
    partition = replica_manager.get_partition(tp)
    min_insync = partition.log.config.min_insync_replicas if partition is not None else 1
    await replica_manager.wait_replicated(tp, result.last_offset, min_insync=min_insync)
    return int(result.last_offset)


def _read_state_records(
    node: BrokerServices, tp: TopicPartition
) -> Iterator[tuple[bytes | None, bytes | None]]:
    for item in _read_records(node, tp):
        if isinstance(item, tuple):
            yield item


def _read_offsets_records(node: BrokerServices, tp: TopicPartition) -> Iterator[LoadedItem]:
    return _read_records(node, tp)


def _read_records(node: BrokerServices, tp: TopicPartition) -> Iterator[LoadedItem]:
    """Every record of the partition in offset order: plain records as (key, value), records of
    transactional batches and transaction markers tagged with their producer."""
    partition = node.replica_manager.get_partition(tp)
    if partition is None:
        raise KafkaError(ErrorCode.not_coordinator, f"{tp} is not hosted here")
    partition_log = partition.log
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        result = partition_log.read(
            offset, max_bytes=_READ_CHUNK_BYTES, max_offset=end, min_one_message=True
        )
        data = b"".join(region.read_bytes() for region in result.regions)
        if not data:
            break
        for batch in iter_batches(data):
            header = batch.header
            offset = header.next_offset
            if header.is_control:
                if header.producer_id >= 0:
                    for record in batch.records():
                        control_type, _ = parse_control_record(record)
                        committed = control_type == ControlRecordType.COMMIT
                        yield TransactionMarker(header.producer_id, committed)
                continue
            transactional = header.is_transactional and header.producer_id >= 0
            for record in batch.records():
                if record.offset < partition_log.log_start_offset:
                    continue
                if transactional:
                    yield TransactionalRecord(
                        header.producer_id, header.producer_epoch, record.key, record.value
                    )
                else:
                    yield record.key, record.value
