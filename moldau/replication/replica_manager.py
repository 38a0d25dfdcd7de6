"""The partitions this broker hosts, and the produce/fetch paths through them (Kafka's ReplicaManager).

It turns metadata changes into partition roles (`apply_metadata`), appends produced batches to
leaders (`append_records`), answers acks=all once the batch is durable (`wait_durable`: group
commit — one fsync in a worker thread covers every append before it), and reads partitions for
fetches, parking them in the purgatory until `min_bytes` are ready or `max_wait_ms` passes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.partition import Partition
from moldau.replication.purgatory import Purgatory
from moldau.storage import LogConfig, LogManager, PartitionLog
from moldau.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the metadata says about one partition (from the image)."""

    topic_id: object
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ReplicaManager:
    def __init__(self, log_manager: LogManager, *, node_id: int) -> None:
        self.log_manager = log_manager
        self.node_id = node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = Purgatory()
        self._flush_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="flush")
        self._flushes: dict[TopicPartition, asyncio.Future[int]] = {}
        self._flush_again: set[TopicPartition] = set()

    # --- metadata ------------------------------------------------------------------------------

    def become_leader_or_follower(
        self, tp: TopicPartition, state: PartitionState, config: LogConfig
    ) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            partition_log = self.log_manager.get_or_create_log(tp, config, topic_id=state.topic_id)
            partition = Partition(tp, partition_log, topic_id=state.topic_id)
            partition.local_node_id = self.node_id
            self.partitions[tp] = partition
        else:
            partition.log.update_config(config)
        new_epoch = state.leader_epoch != partition.leader_epoch or partition.leader_id < 0
        partition.leader_id = state.leader
        partition.leader_epoch = state.leader_epoch
        partition.partition_epoch = state.partition_epoch
        partition.replicas = state.replicas
        partition.isr = state.isr
        if partition.is_leader and new_epoch:
            partition.log.assign_leader_epoch(state.leader_epoch, partition.log.log_end_offset)
        if partition.is_leader:
            partition.maybe_advance_high_watermark()
        return partition

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.log.update_config(config)

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            self.fetch_purgatory.wake(tp)
        if delete:
            self.log_manager.delete_log(tp)

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        partition.check_leader(current_leader_epoch)
        return partition

    # --- produce -------------------------------------------------------------------------------

    def append_records(self, tp: TopicPartition, records: bytes, *, required_acks: int) -> Any:
        """Append to the leader's log; returns the storage's AppendResult. Sync: no awaits."""
        partition = self.leader_partition(tp)
        if required_acks == -1:
            min_isr = partition.log.config.min_insync_replicas
            if len(partition.isr) < min_isr:
                raise KafkaError(ErrorCode.not_enough_replicas)
        result = partition.log.append_as_leader(records, leader_epoch=partition.leader_epoch)
        partition.maybe_advance_high_watermark()
        self.fetch_purgatory.wake(tp)
        return result

    async def wait_durable(self, tp: TopicPartition, offset: int) -> None:
        """Return once every offset up to and including `offset` is fsynced (group commit)."""
        partition = self.partitions.get(tp)
        if partition is None:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        partition_log = partition.log
        while partition_log.flushed_offset <= offset:
            pending = self._flushes.get(tp)
            if pending is None or pending.done():
                # (A done future may still be registered: its callback has not run yet. Awaiting
                # it would not yield, so start a fresh flush instead of spinning.)
                pending = self._start_flush(tp, partition_log)
            else:
                # A flush is running; it may have started before our append: run one more after.
                self._flush_again.add(tp)
            await asyncio.shield(pending)

    def _start_flush(self, tp: TopicPartition, partition_log: PartitionLog) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = asyncio.ensure_future(
            loop.run_in_executor(self._flush_executor, partition_log.flush)
        )
        self._flushes[tp] = future

        def done(_: asyncio.Future[int]) -> None:
            if self._flushes.get(tp) is future:
                del self._flushes[tp]
            if tp in self._flush_again:
                self._flush_again.discard(tp)
                if tp not in self._flushes:
                    self._start_flush(tp, partition_log)

        future.add_done_callback(done)
        return future

    # --- fetch ---------------------------------------------------------------------------------

    def fetch_upper_bound(self, partition: Partition, isolation_level: int) -> int:
        if isolation_level == 1:
            return partition.log.last_stable_offset
        return partition.log.high_watermark

    async def wait_for_data(
        self,
        keys: Iterable[TopicPartition],
        ready: Any,
        max_wait_ms: int,
    ) -> bool:
        return await self.fetch_purgatory.wait(keys, ready, max_wait_ms / 1000.0)

    def logs(self) -> Mapping[TopicPartition, Partition]:
        return self.partitions

    def shutdown(self) -> None:
        self.fetch_purgatory.wake_all()
        self._flush_executor.shutdown(wait=True)
