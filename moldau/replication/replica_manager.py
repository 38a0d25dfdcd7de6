"""The partitions this broker hosts, and the produce/fetch paths through them (Kafka's ReplicaManager).

It turns metadata changes into partition roles (`apply_metadata`), appends produced batches to
leaders (`append_records`), answers acks=all once the batch is durable (`when_durable`: group
commit — one fsync covers every append before it), reads consumers' fetches within their bounds
and parks them in the purgatory until `min_bytes` are ready or `max_wait_ms` passes (`fetch`,
`consumer_fetch.py`).

A partition this broker should host but cannot (its log could not be created, or its log dir
failed) is offline, Kafka's `HostedPartition.Offline`: every request for it answers
KAFKA_STORAGE_ERROR instead of UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from moldau.clock import SYSTEM_CLOCK, Clock, monotonic_ms
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.fetch_response import FetchPartitionData
from moldau.replication import consumer_fetch, delayed_produce
from moldau.replication.consumer_fetch import ConsumerFetchParams, PartitionFetch
from moldau.replication.partition import Partition
from moldau.replication.purgatory import Purgatory
from moldau.replication.replica_tracker import IsrChange
from moldau.replication.stats import ReplicationStats
from moldau.replication.throttle import ReplicationThrottle
from moldau.storage import (
    AppendOrigin,
    AppendResult,
    DecodeBudget,
    LogConfig,
    LogManager,
    PartitionLog,
    delete_records,
)
from moldau.types import TopicPartition

log = logging.getLogger(__name__)

# A group commit of at most this many bytes fsyncs on the event loop: on a fast disk that takes
# ~0.2 ms, less than handing the work to a thread and back (two wake-ups, each a wait for a free
# core on a busy machine, then a wait for the GIL) — the handoff was most of acks=all latency.
# Larger flushes go to a worker thread so the loop keeps serving while the disk writes, and so do
# small ones when several partitions need one in the same loop iteration (they overlap there).
INLINE_FLUSH_MAX_BYTES: Final = 256 * 1024
# A disk that is slow right now sends every flush to the thread for the next
# INLINE_FLUSH_BACKOFF_S seconds, so it cannot stall the whole broker: slow is one inline fsync
# above INLINE_FLUSH_STALL_S, or their moving average (weight INLINE_FLUSH_EWMA_WEIGHT) above
# INLINE_FLUSH_SLOW_S. One fsync of a few ms now and then is not enough: the thread costs every
# flush ~2 ms more on a busy 2-core machine (the handoffs and the GIL), far more than it saves.
INLINE_FLUSH_STALL_S: Final = 0.020
INLINE_FLUSH_SLOW_S: Final = 0.002
INLINE_FLUSH_EWMA_WEIGHT: Final = 0.1
INLINE_FLUSH_BACKOFF_S: Final = 5.0

DurableCallback = Callable[[BaseException | None], None]
"""Told None once the offsets it waits for are fsynced, or the error the flush failed with."""
IsrChangeHandler = Callable[[TopicPartition, Partition, IsrChange], None]


def _flush_error(flush: asyncio.Future[int]) -> BaseException | None:
    if flush.cancelled():
        return KafkaError(ErrorCode.kafka_storage_error, "flush cancelled")
    return flush.exception()


@dataclass(slots=True)
class FollowerRead:
    """What a leader answers one partition of a follower's fetch."""

    error_code: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Any = b""  # file regions, or b""
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): truncate, then fetch
    current_leader: tuple[int, int] | None = None


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
    def __init__(
        self,
        log_manager: LogManager,
        *,
        node_id: int,
        clock: Clock = SYSTEM_CLOCK,
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self.log_manager = log_manager
        self.node_id = node_id
        # Followers' fetch and caught-up times, against replica.lag.time.max.ms: monotonic, so
        # a wall-clock step on the leader neither drops every follower from the ISR nor keeps
        # a stalled one in it (Kafka reads its wall clock here).
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        # Set by the node: the follower fetchers, and who sends proposed ISR changes on.
        self.fetchers: Any = None
        self.on_isr_change: IsrChangeHandler | None = None
        self.active_brokers: Callable[[], set[int]] | None = None
        # KIP-392: with a rack-aware replica selector, the rack of a broker (None: unknown).
        self.rack_of: Callable[[int], str | None] | None = None
        self.throttle: ReplicationThrottle | None = None  # replication throttles (KIP-73)
        self._replication_waiters: dict[TopicPartition, list[tuple[int, DurableCallback]]] = {}
        self._low_watermark_waiters: dict[
            TopicPartition, list[tuple[int, asyncio.Future[int]]]
        ] = {}
        self.offline_partitions: dict[TopicPartition, str] = {}  # -> why (the log dir's error)
        self.fetch_purgatory = Purgatory()
        self._flush_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="flush")
        self._flushing: set[TopicPartition] = set()
        self._small_flushes: list[tuple[TopicPartition, PartitionLog]] = []  # run next iteration
        self._durable_waiters: dict[TopicPartition, list[tuple[int, DurableCallback]]] = {}
        self._threaded_flushes_until = 0.0  # loop time; see INLINE_FLUSH_SLOW_S
        self._inline_flush_average_s = 0.0
        self.stats = ReplicationStats()  # (read when the node's metrics are scraped)

    # --- metadata ------------------------------------------------------------------------------

    def become_leader_or_follower(
        self, tp: TopicPartition, state: PartitionState, config: LogConfig
    ) -> Partition:
        partition = self.partitions.get(tp)
        created = partition is None
        if partition is None:
            partition_log = self.log_manager.get_or_create_log(tp, config, topic_id=state.topic_id)
            partition = Partition(tp, partition_log, topic_id=state.topic_id)
            partition.local_node_id = self.node_id
            self.partitions[tp] = partition
            self.offline_partitions.pop(tp, None)
        else:
            partition.log.update_config(config)
        was_leader = partition.is_leader and not created
        new_epoch = created or state.leader_epoch != partition.leader_epoch
        replicas_changed = partition.replicas != state.replicas
        if was_leader and not new_epoch and partition.isr != state.isr:
            self.stats.isr_changed(partition.isr, state.isr)
        partition.leader_id = state.leader
        partition.leader_epoch = state.leader_epoch
        partition.partition_epoch = state.partition_epoch
        partition.replicas = state.replicas
        partition.isr = state.isr
        if partition.is_leader:
            if new_epoch or not was_leader:
                partition.log.assign_leader_epoch(state.leader_epoch, partition.log.log_end_offset)
                partition.become_leader(now_ms=monotonic_ms(self.clock))
            elif replicas_changed:  # a reassignment: the same leadership, other followers
                partition.replicas_changed(now_ms=monotonic_ms(self.clock))
            else:
                partition.tracker.committed(state.isr)
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            if partition.maybe_advance_high_watermark():
                self._high_watermark_moved(tp, partition)
        else:
            self._fail_replication_waiters(tp, KafkaError(ErrorCode.not_leader_or_follower))
            if self.fetchers is not None:
                if state.leader >= 0 and self.node_id in state.replicas:
                    self.fetchers.add_partition(tp, partition, leader=state.leader)
                else:
                    self.fetchers.remove_partition(tp)
        return partition

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.log.update_config(config)

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        self.offline_partitions.pop(tp, None)
        self._stop_replicating(tp)
        if partition is not None:
            self.fetch_purgatory.wake(tp)
        if delete:
            self.log_manager.delete_log(tp)

    def mark_offline(self, tp: TopicPartition, reason: str) -> None:
        """`tp` should be hosted here but has no usable log: KAFKA_STORAGE_ERROR to every
        request for it until `become_leader_or_follower` succeeds."""
        partition = self.partitions.pop(tp, None)
        self.offline_partitions[tp] = reason
        self._stop_replicating(tp, KafkaError(ErrorCode.kafka_storage_error, reason))
        if partition is not None:
            self.fetch_purgatory.wake(tp)
        self._fail_durable_waiters(tp, reason)

    def _stop_replicating(self, tp: TopicPartition, error: KafkaError | None = None) -> None:
        """No more fetching for `tp`; its acks=all and DeleteRecords waiters fail with `error`
        (NOT_LEADER_OR_FOLLOWER unless said: KAFKA_STORAGE_ERROR for an offline log, as Kafka)."""
        if self.fetchers is not None:
            self.fetchers.remove_partition(tp)
        self._fail_replication_waiters(tp, error or KafkaError(ErrorCode.not_leader_or_follower))

    def handle_log_dir_failure(self, log_dir: str, reason: str) -> list[TopicPartition]:
        """A FAILED log dir: its partitions go offline and their logs are closed (as Kafka's
        `handleLogDirFailure`). Returns them."""
        gone = self.log_manager.take_offline(log_dir)
        for tp in gone:
            self.mark_offline(tp, reason)
        return gone

    def alter_replica_log_dir(self, tp: TopicPartition, path: str) -> None:
        """Move the replica of `tp` to the log dir `path` (Kafka's `alterReplicaLogDirs`; the
        move runs in the log manager's mover thread). KafkaError as a client should see it."""
        reason = self.offline_partitions.get(tp)
        if reason is not None:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{tp} is offline: {reason}")
        self.log_manager.alter_log_dir(tp, path)

    def _fail_durable_waiters(self, tp: TopicPartition, reason: str) -> None:
        error = KafkaError(ErrorCode.kafka_storage_error, reason)
        for _offset, callback in self._durable_waiters.pop(tp, ()):
            try:
                callback(error)
            except Exception:
                log.exception("a durability callback of %s failed", tp)

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def hosted_partition(self, tp: TopicPartition) -> Partition:
        """The replica of `tp` on this broker, leader or follower (Kafka's
        `getPartitionOrError`): KAFKA_STORAGE_ERROR when it is offline, UNKNOWN_TOPIC_OR_PARTITION
        when this broker has none."""
        partition = self.partitions.get(tp)
        if partition is None:
            reason = self.offline_partitions.get(tp)
            if reason is not None:
                raise KafkaError(ErrorCode.kafka_storage_error, f"{tp} is offline: {reason}")
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return partition

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        partition = self.hosted_partition(tp)
        partition.check_leader(current_leader_epoch)
        return partition

    def readable_partition(
        self, tp: TopicPartition, current_leader_epoch: int = -1, *, allow_follower: bool
    ) -> Partition:
        """The replica a consumer's fetch may read: the leader, or with `allow_follower` (Fetch
        v11+, KIP-392) a follower too, in the leader epoch the client names."""
        if not allow_follower:
            return self.leader_partition(tp, current_leader_epoch)
        partition = self.partitions.get(tp)
        if partition is None or partition.leader_id < 0:
            return self.leader_partition(tp, current_leader_epoch)  # (raises)
        partition.check_epoch(current_leader_epoch)
        return partition

    def preferred_read_replica(self, partition: Partition, fetch_offset: int, rack: str) -> int:
        """KIP-392 on a leader with the rack-aware selector: the replica a consumer in `rack`
        should fetch from, or -1 to read here. Candidates are the ISR members on live brokers
        that hold `fetch_offset` (Kafka's rule since KAFKA-14372); the leader wins if it is in
        the client's rack, else the same-rack candidate furthest ahead."""
        rack_of = self.rack_of
        if rack_of is None or not rack or not partition.is_leader:
            return -1
        if rack_of(partition.local_node_id) == rack:
            return -1
        alive = self.active_brokers() if self.active_brokers is not None else None
        best, best_end = -1, -1
        for replica in partition.isr:
            state = partition.tracker.followers.get(replica)
            if state is None or (alive is not None and replica not in alive):
                continue
            if not state.log_start_offset <= fetch_offset <= state.log_end_offset:
                continue
            if rack_of(replica) == rack and state.log_end_offset > best_end:
                best, best_end = replica, state.log_end_offset
        return best

    # --- produce -------------------------------------------------------------------------------

    def append_records(
        self,
        tp: TopicPartition,
        records: bytes,
        *,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        decode_budget: DecodeBudget | None = None,
    ) -> AppendResult:
        """Append to the leader's log: the one way a leader's log is written (a client's
        batches, or a coordinator's: transaction markers); returns the storage's AppendResult.
        Sync: no awaits. `decode_budget` is shared by the partitions of one produce request."""
        partition = self.leader_partition(tp)
        if required_acks == -1:
            min_isr = partition.log.config.min_insync_replicas
            if len(partition.isr) < min_isr:
                raise KafkaError(ErrorCode.not_enough_replicas)
        result = partition.log.append_as_leader(
            records, leader_epoch=partition.leader_epoch, origin=origin, decode_budget=decode_budget
        )
        if not result.duplicate:
            traffic = self.stats.traffic(tp.topic)
            traffic.messages_in += result.record_count
            traffic.bytes_in += len(records)
        if partition.maybe_advance_high_watermark():
            self._high_watermark_moved(tp, partition)
        self.fetch_purgatory.wake(tp)
        return result

    def when_acknowledged(
        self,
        appended: Sequence[tuple[TopicPartition, int]],
        timeout_s: float,
        on_done: Callable[[list[int]], None],
    ) -> None:
        """acks=all (`delayed_produce.when_acknowledged`): `on_done(codes)`, one per partition
        of `appended` (tp, last offset), once each is replicated and durable or `timeout_s`
        has passed."""
        stats = self.stats
        stats.delayed_produces += 1
        stats.delayed_produce_partitions += len(appended)

        def done(codes: list[int]) -> None:
            stats.delayed_produces -= 1
            stats.delayed_produce_partitions -= len(appended)
            on_done(codes)

        delayed_produce.when_acknowledged(self, appended, timeout_s, done)

    # --- replication ---------------------------------------------------------------------------

    def wait_replicated(
        self, tp: TopicPartition, offset: int, *, min_insync: int = 1
    ) -> asyncio.Future[None]:
        """A future done once `offset` is replicated to the ISR and durable here (see
        `when_replicated`)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle(error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

        self.when_replicated(tp, offset, settle, min_insync=min_insync)
        return future

    def when_replicated(
        self, tp: TopicPartition, offset: int, callback: DurableCallback, *, min_insync: int = 1
    ) -> None:
        """acks=all: call `callback(None)` once `offset` is below the high watermark (the ISR has
        it, each member durably) and durable here; `callback(error)` if leadership moves away
        first, the flush fails, or the ISR shrank below `min_insync` meanwhile
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka answers)."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            callback(KafkaError(ErrorCode.not_leader_or_follower))
            return

        def durable(error: BaseException | None) -> None:
            if error is None and len(partition.isr) < min_insync:
                error = KafkaError(ErrorCode.not_enough_replicas_after_append)
            callback(error)

        if partition.log.high_watermark > offset:
            self.when_durable(tp, offset, durable)
            return
        self._replication_waiters.setdefault(tp, []).append((offset, durable))

    def _high_watermark_moved(self, tp: TopicPartition, partition: Partition) -> None:
        waiters = self._replication_waiters.get(tp)
        if not waiters:
            return
        high_watermark = partition.log.high_watermark
        ready = [(o, c) for o, c in waiters if o < high_watermark]
        if not ready:
            return
        remaining = [(o, c) for o, c in waiters if o >= high_watermark]
        if remaining:
            self._replication_waiters[tp] = remaining
        else:
            del self._replication_waiters[tp]
        for offset, callback in ready:
            self.when_durable(tp, offset, callback)

    def _fail_replication_waiters(self, tp: TopicPartition, error: KafkaError) -> None:
        for _offset, future in self._low_watermark_waiters.pop(tp, ()):
            if not future.done():
                future.set_exception(error)
        for _offset, callback in self._replication_waiters.pop(tp, ()):
            try:
                callback(error)
            except Exception:
                log.exception("a replication callback of %s failed", tp)

    def record_follower_fetch(
        self,
        tp: TopicPartition,
        partition: Partition,
        replica_id: int,
        *,
        fetch_offset: int,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> None:
        """A follower's fetch reached the leader: its progress, the high watermark, its log
        start (for DeleteRecords), and an ISR expansion to propose if it caught up."""
        now = monotonic_ms(self.clock)
        if partition.record_follower_fetch(
            replica_id,
            fetch_offset=fetch_offset,
            now_ms=now,
            broker_epoch=broker_epoch,
            log_start_offset=log_start_offset,
        ):
            self._high_watermark_moved(tp, partition)
            self.fetch_purgatory.wake(tp)
        if tp in self._low_watermark_waiters:
            self._low_watermark_moved(tp, partition)
        if replica_id not in partition.isr:
            self._propose_isr_change(tp, partition, now)

    def read_for_follower(
        self,
        tp: TopicPartition,
        replica_id: int,
        *,
        fetch_offset: int,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        max_bytes: int,
        min_one_message: bool,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> FollowerRead:
        """A follower's fetch of one partition (Kafka's leader side of replica fetching): its
        records up to the log end (not the high watermark), or the diverging epoch when its log
        has gone where the leader's did not (KIP-320: the end offset of the largest epoch at
        or below its last fetched one), and the fetch recorded as its progress."""
        partition = self.partitions.get(tp)
        if partition is None:
            code = (
                ErrorCode.kafka_storage_error
                if tp in self.offline_partitions
                else (ErrorCode.not_leader_or_follower)
            )
            return FollowerRead(error_code=int(code))
        try:
            partition.check_leader(current_leader_epoch)
        except KafkaError as error:
            return FollowerRead(
                error_code=int(error.code),
                current_leader=(partition.leader_id, partition.leader_epoch),
            )
        if replica_id not in partition.replicas:
            return FollowerRead(error_code=int(ErrorCode.not_leader_or_follower))
        log_ = partition.log
        if last_fetched_epoch >= 0:
            epoch, end_offset = log_.end_offset_for_leader_epoch(last_fetched_epoch)
            if end_offset < fetch_offset or epoch < last_fetched_epoch:
                return FollowerRead(
                    high_watermark=log_.high_watermark,
                    log_start_offset=log_.log_start_offset,
                    diverging_epoch=(epoch, end_offset),
                )
        if fetch_offset > log_.log_end_offset or fetch_offset < log_.log_start_offset:
            return FollowerRead(
                error_code=int(ErrorCode.offset_out_of_range),
                high_watermark=log_.high_watermark,
                log_start_offset=log_.log_start_offset,
            )
        self.record_follower_fetch(
            tp,
            partition,
            replica_id,
            fetch_offset=fetch_offset,
            broker_epoch=broker_epoch,
            log_start_offset=log_start_offset,
        )
        records: Any = b""
        if fetch_offset < log_.log_end_offset and not self.leader_throttles(tp, replica_id):
            read = log_.read(
                fetch_offset,
                max_bytes=max(max_bytes, 0),
                max_offset=log_.log_end_offset,
                min_one_message=min_one_message,
            )
            records = list(read.regions)
            if self.throttle is not None and self.throttle.leader_throttled(tp):
                self.throttle.leader.record(sum(region.length for region in records))
        return FollowerRead(
            high_watermark=log_.high_watermark,
            log_start_offset=log_.log_start_offset,
            records=records,
        )

    def delete_records(self, tp: TopicPartition, offset: int) -> asyncio.Future[int]:
        """DeleteRecords on a leader: advance its log start offset to `offset` (-1: the high
        watermark) and answer, with the low watermark, once every replica on a live broker has
        advanced its own (each follower does when its next fetch brings the leader's log start;
        Kafka's delayed delete-records). KafkaError as a client should see it."""
        partition = self.leader_partition(tp)
        log_ = partition.log
        target = log_.high_watermark if offset == -1 else offset
        if target < 0 or target > log_.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range)
        delete_records(log_, target)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._low_watermark_waiters.setdefault(tp, []).append((target, future))
        self._low_watermark_moved(tp, partition)
        return future

    def _low_watermark_moved(self, tp: TopicPartition, partition: Partition) -> None:
        alive = self.active_brokers() if self.active_brokers is not None else None
        low = partition.tracker.low_watermark(partition.log.log_start_offset, alive)
        waiting = []
        for offset, future in self._low_watermark_waiters.pop(tp, ()):
            if future.done():
                continue
            if low >= offset:
                future.set_result(low)
            else:
                waiting.append((offset, future))
        if waiting:
            self._low_watermark_waiters[tp] = waiting

    def leader_throttles(self, tp: TopicPartition, replica_id: int) -> bool:
        """Whether a follower's fetch of `tp` gets no records now (Kafka's shouldLeaderThrottle):
        the follower is out of the ISR, this leader's replica is throttled and the leader's
        replication quota is exceeded."""
        throttle = self.throttle
        partition = self.partitions.get(tp)
        return (
            throttle is not None
            and partition is not None
            and replica_id not in partition.isr
            and throttle.leader_throttled(tp)
            and throttle.leader.exceeded()
        )

    def check_isr(self) -> None:
        """Propose ISR changes for followers that fell behind (run periodically, as Kafka's
        isr-expiration task every replica.lag.time.max.ms / 2)."""
        now = monotonic_ms(self.clock)
        for tp, partition in list(self.partitions.items()):
            if partition.is_leader and len(partition.replicas) > 1:
                self._propose_isr_change(tp, partition, now)

    def _propose_isr_change(self, tp: TopicPartition, partition: Partition, now: int) -> None:
        if self.on_isr_change is None:
            return
        change = partition.tracker.proposed_change(
            now_ms=now,
            high_watermark=partition.log.high_watermark,
            epoch_start_offset=partition.epoch_start_offset,
            lag_max_ms=self.replica_lag_time_max_ms,
            # (a fenced or shutting-down follower would be refused: INELIGIBLE_REPLICA)
            alive=self.active_brokers() if self.active_brokers is not None else None,
        )
        if change is not None:
            partition.tracker.pending = change
            self.on_isr_change(tp, partition, change)

    def isr_change_settled(
        self,
        tp: TopicPartition,
        *,
        isr: tuple[int, ...] | None,
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        """The controller answered an ISR change: `isr` is what it committed (None: refused;
        the metadata will tell the truth)."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return
        if isr is None or leader_epoch != partition.leader_epoch:
            partition.tracker.pending = None
            return
        if partition_epoch >= partition.partition_epoch:
            if partition.isr != isr:
                self.stats.isr_changed(partition.isr, isr)
            partition.isr = isr
            partition.partition_epoch = partition_epoch
        partition.tracker.committed(partition.isr)
        if partition.maybe_advance_high_watermark():
            self._high_watermark_moved(tp, partition)
            self.fetch_purgatory.wake(tp)

    def wait_durable(self, tp: TopicPartition, offset: int) -> asyncio.Future[None]:
        """A future done once every offset up to and including `offset` is fsynced (see
        `when_durable`). Cancelling it (a request that timed out) leaves the shared flush running
        for the others."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle(error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

        self.when_durable(tp, offset, settle)
        return future

    def when_durable(self, tp: TopicPartition, offset: int, callback: DurableCallback) -> None:
        """Call `callback(None)` once every offset up to and including `offset` is fsynced, or
        `callback(error)` if the flush failed; at once if it already is.

        Group commit: one fsync covers every append made before it started; waiters it does not
        cover start the next one when it ends. Callbacks run straight from the flush's
        completion: each future a result passes through costs a loop iteration before its
        callbacks run, and on a busy broker an iteration is every request that arrived meanwhile.
        """
        partition = self.partitions.get(tp)
        if partition is None:
            callback(KafkaError(ErrorCode.not_leader_or_follower))
            return
        partition_log = partition.log
        if partition_log.flushed_offset > offset:
            callback(None)
            return
        self._durable_waiters.setdefault(tp, []).append((offset, callback))
        if tp not in self._flushing:
            self._start_flush(tp, partition_log)

    def _start_flush(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        loop = asyncio.get_running_loop()
        self._flushing.add(tp)
        if (
            partition_log.unflushed_bytes <= INLINE_FLUSH_MAX_BYTES
            and loop.time() >= self._threaded_flushes_until
        ):
            # Soon, not now: requests read in this loop iteration append first and share it.
            if not self._small_flushes:
                loop.call_soon(self._run_small_flushes)
            self._small_flushes.append((tp, partition_log))
            return
        self._flush_in_thread(tp, partition_log)

    def _flush_in_thread(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        loop = asyncio.get_running_loop()
        flush = loop.run_in_executor(self._flush_executor, partition_log.flush)
        flush.add_done_callback(lambda done: self._flushed(tp, partition_log, _flush_error(done)))

    def _run_small_flushes(self) -> None:
        """One partition's small flush runs on the loop. Several partitions' go to the threads:
        fsyncs of different files overlap there, and the loop serves meanwhile."""
        flushes, self._small_flushes = self._small_flushes, []
        if len(flushes) == 1:
            self._flush_inline(*flushes[0])
            return
        for tp, partition_log in flushes:
            self._flush_in_thread(tp, partition_log)

    def _flush_inline(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()  # loop.time() is in whole ms under uvloop
        error: BaseException | None = None
        try:
            partition_log.flush()
        except Exception as exc:  # reported to the waiters
            error = exc
        took = time.perf_counter() - started
        average = self._inline_flush_average_s
        average += (took - average) * INLINE_FLUSH_EWMA_WEIGHT
        if took > INLINE_FLUSH_STALL_S or average > INLINE_FLUSH_SLOW_S:
            self._threaded_flushes_until = loop.time() + INLINE_FLUSH_BACKOFF_S
            average = 0.0  # measured afresh when the backoff ends
        self._inline_flush_average_s = average
        self._flushed(tp, partition_log, error)

    def _flushed(
        self, tp: TopicPartition, partition_log: PartitionLog, error: BaseException | None
    ) -> None:
        """Settle the waiters a finished flush covers; start another for the rest."""
        self._flushing.discard(tp)
        flushed_offset = partition_log.flushed_offset
        settled: list[DurableCallback] = []
        remaining = []
        for offset, callback in self._durable_waiters.pop(tp, ()):
            if error is not None or offset < flushed_offset:
                settled.append(callback)
            else:
                remaining.append((offset, callback))
        if remaining:
            self._durable_waiters[tp] = remaining
            self._start_flush(tp, partition_log)
        # Last: a callback may append and wait again, which must find the state above.
        for callback in settled:
            try:
                callback(error)
            except Exception:
                log.exception("a durability callback of %s failed", tp)

    # --- fetch ---------------------------------------------------------------------------------

    def fetch(
        self,
        fetches: Sequence[PartitionFetch],
        params: ConsumerFetchParams,
        on_complete: Callable[[list[FetchPartitionData]], None],
    ) -> list[FetchPartitionData] | None:
        """A consumer's fetch (`consumer_fetch.fetch`): each partition's answer now, or None
        and `on_complete(answers)` once `min_bytes` are ready or `max_wait_ms` has passed."""

        def complete(answers: list[FetchPartitionData]) -> None:
            self._count_bytes_out(fetches, answers)
            on_complete(answers)

        answers = consumer_fetch.fetch(self, fetches, params, complete)
        if answers is not None:
            self._count_bytes_out(fetches, answers)
        return answers

    def _count_bytes_out(
        self, fetches: Sequence[PartitionFetch], answers: list[FetchPartitionData]
    ) -> None:
        for partition_fetch, answer in zip(fetches, answers, strict=True):
            records = answer.records
            if type(records) is list and records and partition_fetch.tp is not None:
                size = sum(region.length for region in records)
                self.stats.traffic(partition_fetch.tp.topic).bytes_out += size

    def watch_for_data(
        self,
        keys: Iterable[TopicPartition],
        ready: Callable[[], bool],
        max_wait_ms: int,
        on_done: Callable[[bool], None],
    ) -> None:
        """Park a fetch until `ready()` after an append to one of `keys`, or `max_wait_ms`."""
        self.fetch_purgatory.watch(keys, ready, max_wait_ms / 1000.0, on_done)

    def wake_fetches(self, tp: TopicPartition) -> None:
        """Something other than an append may have made the fetches waiting on `tp` ready
        (records a share group released): they check again."""
        self.fetch_purgatory.wake(tp)

    def logs(self) -> Mapping[TopicPartition, Partition]:
        return self.partitions

    def shutdown(self) -> None:
        for tp in list(self._replication_waiters):
            self._fail_replication_waiters(tp, KafkaError(ErrorCode.not_leader_or_follower))
        self.fetch_purgatory.expire_all()
        self._flush_executor.shutdown(wait=True)
