"""Wiring of the coordinators into a node: internal topics, record writes and replays.

The group coordinator runtime is given two callables: `append` builds a batch of its key/value
records, appends it to the `__consumer_offsets` partition and waits until it is durable (the
coordinator answers only after that, as Kafka's does with acks=all); `read_records` replays a
partition from its log start. A single node leads every partition, so it coordinates them all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.node import Node

log = logging.getLogger(__name__)

_OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
_READ_CHUNK_BYTES = 4 * 1024 * 1024


async def start(node: Node) -> None:
    config = GroupCoordinatorConfig.from_properties(node.config)
    await node.ensure_internal_topic(
        OFFSETS_TOPIC,
        partitions=config.offsets_topic_num_partitions,
        configs=dict(_OFFSETS_TOPIC_CONFIGS),
    )

    async def append(tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]) -> int:
        batch = build_batch(
            [NewRecord(key=key, value=value) for key, value in pairs],
            timestamp=node.clock.now_ms(),
        )
        result = node.replica_manager.append_records(tp, batch, required_acks=-1)
        await node.replica_manager.wait_durable(tp, result.last_offset)
        return int(result.last_offset)

    runtime = GroupCoordinatorRuntime(
        config,
        append=append,
        read_records=lambda tp: _read_records(node, tp),
        clock=node.clock,
    )
    # Published before loading, so requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
    node.group_coordinator = runtime
    node.on_stop(runtime.stop)
    await runtime.start()


def _read_records(node: Node, tp: TopicPartition) -> Iterator[tuple[bytes | None, bytes | None]]:
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
                continue
            for record in batch.records():
                if record.offset >= partition_log.log_start_offset:
                    yield record.key, record.value
