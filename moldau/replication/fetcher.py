"""Followers pulling from leaders (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

One `ReplicaFetcher` per source broker holds the partitions this broker follows there and runs
one loop: make every appended batch durable (group commit: one fsync per partition per round),
then send one Fetch (with this broker's replica id) naming each partition at its log end offset
and the epoch of its last batch, and apply the answer:

- records: appended as they are (`append_as_follower`: the leader's offsets and epochs, producer
  state rebuilt from them), the high watermark taken from the leader but never past the log end;
- a diverging epoch (KIP-320): the log went where the leader's did not — truncate to the end of
  that epoch (or the leader's end offset for it, if smaller) and fetch again;
- OFFSET_OUT_OF_RANGE below the leader's log start: start over, empty, at that start;
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: the metadata has news;
  wait for it (the partition moves to another fetcher, or stops being followed).

A round whose only errors were UNKNOWN_LEADER_EPOCH (the source has not yet applied the
metadata that made it leader) is tried again after `SOURCE_BEHIND_BACKOFF_S`, doubling while it lasts, up to
`replica.fetch.backoff.ms` (where Kafka's fetcher waits at once): the source catches up within
milliseconds, and until this follower fetches, the new leader's high watermark (and every
acks=all write) waits.

A replica out of the ISR under a follower replication throttle (`throttle.py`) is left out of
the fetch while the quota is exceeded.

Because the flush comes before the fetch, a follower's fetch offset is always durable: the leader
may count it towards the high watermark (acks=all means every ISR member fsynced the batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.partition import Partition
from moldau.replication.throttle import ReplicationThrottle
from moldau.storage import delete_records
from moldau.types import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topic names, last fetched epoch, diverging epoch, replica id in the request
SOURCE_BEHIND_BACKOFF_S = 0.02
_WAIT_FOR_METADATA = {
    int(ErrorCode.not_leader_or_follower),
    int(ErrorCode.fenced_leader_epoch),
    int(ErrorCode.unknown_leader_epoch),
    int(ErrorCode.unknown_topic_or_partition),
    int(ErrorCode.kafka_storage_error),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherConfig:
    """Kafka's `replica.fetch.*` settings."""

    max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms


Connect = Callable[[int], Awaitable[Any]]  # broker id -> an open client connection
Flush = Callable[[TopicPartition, Partition], Awaitable[None]]


class ReplicaFetcherManager:
    def __init__(
        self,
        *,
        node_id: int,
        connect: Connect,
        flush: Flush,
        config: FetcherConfig,
        on_progress: Callable[[TopicPartition], None] | None = None,
        throttle: ReplicationThrottle | None = None,
    ) -> None:
        self.node_id = node_id
        self.throttle = throttle
        self._connect = connect
        self._flush = flush
        self.config = config
        self._on_progress = on_progress
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._source: dict[TopicPartition, int] = {}

    def add_partition(self, tp: TopicPartition, partition: Partition, *, leader: int) -> None:
        """Follow `tp` from broker `leader` (moving it from another fetcher if need be)."""
        if self._source.get(tp) == leader:
            self._fetchers[leader].partitions[tp] = partition
            self._fetchers[leader].wake()
            return
        self.remove_partition(tp)
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = ReplicaFetcher(self, leader)
        fetcher.partitions[tp] = partition
        self._source[tp] = leader
        fetcher.start()

    def remove_partition(self, tp: TopicPartition) -> None:
        leader = self._source.pop(tp, None)
        if leader is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is not None:
            fetcher.partitions.pop(tp, None)
            if not fetcher.partitions:
                del self._fetchers[leader]
                fetcher.stop()

    def throttles(self, tp: TopicPartition, partition: Partition) -> bool:
        """Whether `tp` stays out of the next fetch (Kafka's shouldFollowerThrottle): this
        replica is out of the ISR and throttled, and the follower quota is exceeded."""
        throttle = self.throttle
        return (
            throttle is not None
            and self.node_id not in partition.isr
            and throttle.follower_throttled(tp)
            and throttle.follower.exceeded()
        )

    @property
    def followed(self) -> dict[TopicPartition, int]:
        """Each followed partition's source broker."""
        return dict(self._source)

    async def close(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._source.clear()
        for fetcher in fetchers:
            fetcher.stop()
        for fetcher in fetchers:
            await fetcher.wait_stopped()


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: dict[TopicPartition, Partition] = {}
        self._task: asyncio.Task[None] | None = None
        self._connection: Any = None
        self._wakeup = asyncio.Event()
        # Rounds in a row whose every answer was UNKNOWN_LEADER_EPOCH (the source behind us).
        self._behind_rounds = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.leader}"
            )

    def wake(self) -> None:
        self._wakeup.set()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def wait_stopped(self) -> None:
        task = self._task
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
        await self._disconnect()

    async def _run(self) -> None:
        config = self.manager.config
        while self.partitions:
            try:
                progressed = await self._round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("fetching from broker %d failed: %s", self.leader, exc)
                await self._disconnect()
                progressed, self._behind_rounds = False, 0
            if not progressed:
                self._wakeup.clear()
                backoff = config.backoff_ms / 1000
                if self._behind_rounds:
                    backoff = min(SOURCE_BEHIND_BACKOFF_S * 2 ** (self._behind_rounds - 1), backoff)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), backoff)
        await self._disconnect()

    async def _round(self) -> bool:
        """One fetch; False if nothing could be fetched (back off)."""
        manager = self.manager
        for tp, partition in list(self.partitions.items()):
            if partition.log.flushed_offset < partition.log.log_end_offset:
                await manager._flush(tp, partition)
        fetching = {
            tp: partition
            for tp, partition in self.partitions.items()
            if not manager.throttles(tp, partition)
        }
        if not fetching:
            return False
        if self._connection is None or not self._connection.is_open:
            self._connection = await manager._connect(self.leader)
        config = manager.config
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, partition in fetching.items():
            log_ = partition.log
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": log_.log_end_offset,
                    "last_fetched_epoch": log_.leader_epoch_cache.latest_epoch,
                    "log_start_offset": log_.log_start_offset,
                    "partition_max_bytes": config.max_bytes,
                }
            )
        response = await self._connection.request(
            ApiKey.FETCH,
            {
                "replica_id": manager.node_id,
                "max_wait": config.max_wait_ms,
                "min_bytes": config.min_bytes,
                "max_bytes": config.response_max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {"topic": topic, "partitions": partitions}
                    for topic, partitions in by_topic.items()
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            version=FETCH_VERSION,
            timeout=config.max_wait_ms / 1000 + 30,
        )
        if int(getattr(response, "error_code", 0)):
            raise KafkaError(ErrorCode(int(response.error_code)), "fetch refused")
        progressed = False
        codes = set()
        for topic in response.responses:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, int(answer.partition_index))
                followed = fetching.get(tp)
                if followed is None or self.partitions.get(tp) is not followed:
                    continue  # no longer followed from here (or the replica was replaced)
                codes.add(int(answer.error_code))
                if self._apply(tp, followed, answer):
                    progressed = True
        behind = codes == {int(ErrorCode.unknown_leader_epoch)}
        self._behind_rounds = self._behind_rounds + 1 if behind else 0
        return progressed

    def _apply(self, tp: TopicPartition, partition: Partition, answer: Any) -> bool:
        """Apply one partition's answer; False if it must wait (an error)."""
        progressed, moved = apply_fetched(partition, answer, source=self.leader)
        records = answer.records
        throttle = self.manager.throttle
        if moved and records and throttle is not None and throttle.follower_throttled(tp):
            throttle.follower.record(len(records))
        if moved and self.manager._on_progress is not None:
            self.manager._on_progress(tp)  # (consumers reading this follower)
        return progressed

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()


def apply_fetched(partition: Partition, answer: Any, *, source: int) -> tuple[bool, bool]:
    """A follower applies one partition of its leader's Fetch answer (from broker `source`):
    truncation to a diverging epoch (KIP-320), a restart at the leader's log start when it fell
    behind it, the leader's batches appended as they are, the high watermark and log start
    taken over. Returns (progressed, moved): progressed is False if it must wait (an error);
    moved is True if it appended or its high watermark moved."""
    tp = partition.topic_partition
    log_ = partition.log
    code = int(answer.error_code)
    if code in _WAIT_FOR_METADATA:
        return False, False
    if code == ErrorCode.offset_out_of_range:
        leader_start = int(answer.log_start_offset)
        if log_.log_end_offset < leader_start:
            log.info("%s fell behind the leader's log start %d: starting over", tp, leader_start)
            log_.truncate_fully_and_start_at(leader_start)
            return True, False
        return False, False
    if code:
        log.warning("fetching %s from broker %d: error %d", tp, source, code)
        return False, False
    diverging = getattr(answer, "diverging_epoch", None)
    if diverging is not None and int(diverging.epoch) >= 0 and int(diverging.end_offset) >= 0:
        epoch, leader_end = int(diverging.epoch), int(diverging.end_offset)
        own_epoch, own_end = log_.end_offset_for_leader_epoch(epoch)
        cut = leader_end if own_epoch != epoch else min(leader_end, own_end)
        log.info("%s diverged from the leader at epoch %d: truncating to %d", tp, epoch, cut)
        log_.truncate_to(cut)
        return True, False
    records = answer.records
    appended = False
    if records:  # (a round with nothing new waited at the leader: fetch again at once)
        log_.append_as_follower(records)
        appended = True
    high_watermark = log_.high_watermark
    partition.update_follower_high_watermark(int(answer.high_watermark))
    leader_start = int(answer.log_start_offset)
    if leader_start > log_.log_start_offset:  # DeleteRecords (or retention) on the leader
        delete_records(log_, min(leader_start, log_.high_watermark))
    return True, appended or log_.high_watermark != high_watermark
