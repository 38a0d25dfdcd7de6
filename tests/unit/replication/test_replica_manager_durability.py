"""acks=all waits: group-committed fsyncs shared by waiters, cancellation, errors.

Large flushes run in a worker thread (the `_Log` below blocks there until released); small ones
run on the event loop unless an inline fsync was recently slow.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication import replica_manager as replica_manager_module
from moldau.replication.partition import Partition
from moldau.replication.replica_manager import ReplicaManager
from moldau.types import TopicPartition

TP = TopicPartition("events", 0)


class _Log:
    """A log whose fsyncs block until the test lets them finish (large: flushed in a thread)."""

    unflushed_bytes = 1 << 30
    high_watermark = 0  # (no follower ever fetches here)

    def __init__(self) -> None:
        self.log_end_offset = 0
        self.flushed_offset = 0
        self.flushes = 0
        self.release = threading.Semaphore(0)
        self.error: Exception | None = None

    def append(self, count: int) -> int:
        self.log_end_offset += count
        return self.log_end_offset - 1

    def flush(self) -> int:
        target = self.log_end_offset
        self.release.acquire()
        self.flushes += 1
        if self.error is not None:
            raise self.error
        self.flushed_offset = target
        return target


def _shutdown(manager: ReplicaManager, log: _Log) -> None:
    for _ in range(10):  # never leave a flush thread blocked
        log.release.release()
    manager.shutdown()


def _manager(log: _Log) -> ReplicaManager:
    manager = ReplicaManager(None, node_id=1)  # type: ignore[arg-type]
    manager.partitions[TP] = Partition(TP, log)  # type: ignore[arg-type]
    return manager


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.005)


def test_waiters_appended_before_a_flush_share_it() -> None:
    async def scenario() -> None:
        log = _Log()
        manager = _manager(log)
        first_offset, second_offset = log.append(3), log.append(2)
        first = manager.wait_durable(TP, first_offset)
        second = manager.wait_durable(TP, second_offset)
        log.release.release()
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert log.flushes == 1 and log.flushed_offset == 5
        assert manager.wait_durable(TP, 4).done()  # already durable: no flush
        _shutdown(manager, log)

    asyncio.run(scenario())


def test_an_append_during_a_flush_gets_the_next_flush() -> None:
    async def scenario() -> None:
        log = _Log()
        manager = _manager(log)
        first = manager.wait_durable(TP, log.append(1))
        await _settle()  # the first flush has started (and is blocked)
        late = manager.wait_durable(TP, log.append(1))
        log.release.release()
        await asyncio.wait_for(first, 5)
        await _settle()
        assert not late.done()
        log.release.release()
        await asyncio.wait_for(late, 5)
        assert log.flushes == 2
        _shutdown(manager, log)

    asyncio.run(scenario())


def test_a_cancelled_wait_leaves_the_shared_flush_to_the_others() -> None:
    async def scenario() -> None:
        log = _Log()
        manager = _manager(log)
        cancelled_offset, kept_offset = log.append(1), log.append(1)
        cancelled = manager.wait_durable(TP, cancelled_offset)
        kept = manager.wait_durable(TP, kept_offset)
        cancelled.cancel()
        log.release.release()
        await asyncio.wait_for(kept, 5)
        _shutdown(manager, log)

    asyncio.run(scenario())


def test_a_failed_flush_fails_its_waiters_and_an_unknown_partition_fails_at_once() -> None:
    async def scenario() -> None:
        log = _Log()
        log.error = KafkaError(ErrorCode.kafka_storage_error, "disk gone")
        manager = _manager(log)
        waiter = manager.wait_durable(TP, log.append(1))
        log.release.release()
        with pytest.raises(KafkaError):
            await asyncio.wait_for(waiter, 5)
        with pytest.raises(KafkaError):
            await manager.wait_durable(TopicPartition("missing", 0), 0)
        _shutdown(manager, log)

    asyncio.run(scenario())


class _SmallLog:
    """A log with little to flush: its fsyncs run on the event loop, taking `duration_s`."""

    unflushed_bytes = 1024

    def __init__(self, duration_s: float = 0.0) -> None:
        self.log_end_offset = 0
        self.flushed_offset = 0
        self.duration_s = duration_s
        self.flush_threads: list[int] = []

    def append(self, count: int) -> int:
        self.log_end_offset += count
        return self.log_end_offset - 1

    def flush(self) -> int:
        self.flush_threads.append(threading.get_ident())
        if self.duration_s:
            threading.Event().wait(self.duration_s)  # a slow disk
        self.flushed_offset = self.log_end_offset
        return self.flushed_offset


def test_a_small_flush_runs_on_the_loop_after_the_appends_read_with_it() -> None:
    async def scenario() -> None:
        log = _SmallLog()
        manager = ReplicaManager(None, node_id=1)  # type: ignore[arg-type]
        manager.partitions[TP] = Partition(TP, log)  # type: ignore[arg-type]
        first = manager.wait_durable(TP, log.append(1))
        # Appended later in the same loop iteration: the flush has not run yet and covers it.
        second = manager.wait_durable(TP, log.append(1))
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert log.flush_threads == [threading.get_ident()]
        assert log.flushed_offset == 2
        manager.shutdown()

    asyncio.run(scenario())


def test_a_stalled_inline_flush_sends_the_next_ones_to_the_worker_thread() -> None:
    async def scenario() -> None:
        log = _SmallLog(duration_s=replica_manager_module.INLINE_FLUSH_STALL_S * 1.5)
        manager = ReplicaManager(None, node_id=1)  # type: ignore[arg-type]
        manager.partitions[TP] = Partition(TP, log)  # type: ignore[arg-type]
        await asyncio.wait_for(manager.wait_durable(TP, log.append(1)), 5)
        await asyncio.wait_for(manager.wait_durable(TP, log.append(1)), 5)
        loop_thread = threading.get_ident()
        assert log.flush_threads[0] == loop_thread
        assert log.flush_threads[1] != loop_thread
        manager.shutdown()

    asyncio.run(scenario())


def test_inline_flushes_stay_inline_through_one_slowish_fsync_but_not_a_slow_disk() -> None:
    async def scenario() -> None:
        slowish_s = replica_manager_module.INLINE_FLUSH_SLOW_S * 3  # above the average's limit
        log = _SmallLog(duration_s=slowish_s)
        manager = ReplicaManager(None, node_id=1)  # type: ignore[arg-type]
        manager.partitions[TP] = Partition(TP, log)  # type: ignore[arg-type]
        loop_thread = threading.get_ident()
        await asyncio.wait_for(manager.wait_durable(TP, log.append(1)), 5)
        log.duration_s = 0.0
        await asyncio.wait_for(manager.wait_durable(TP, log.append(1)), 5)
        assert log.flush_threads == [loop_thread, loop_thread]  # one slow fsync: still inline
        log.duration_s = slowish_s  # the disk stays slow: the average crosses the limit
        for _ in range(30):
            await asyncio.wait_for(manager.wait_durable(TP, log.append(1)), 5)
            if log.flush_threads[-1] != loop_thread:
                break
        assert log.flush_threads[-1] != loop_thread
        assert 3 <= log.flush_threads.count(loop_thread) < len(log.flush_threads)
        manager.shutdown()

    asyncio.run(scenario())


def test_small_flushes_of_several_partitions_in_one_iteration_go_to_the_threads() -> None:
    async def scenario() -> None:
        other = TopicPartition("other", 0)
        first, second = _SmallLog(), _SmallLog()
        manager = ReplicaManager(None, node_id=1)  # type: ignore[arg-type]
        manager.partitions[TP] = Partition(TP, first)  # type: ignore[arg-type]
        manager.partitions[other] = Partition(other, second)  # type: ignore[arg-type]
        waits = [
            manager.wait_durable(TP, first.append(1)),
            manager.wait_durable(other, second.append(1)),
        ]
        await asyncio.wait_for(asyncio.gather(*waits), 5)
        loop_thread = threading.get_ident()
        assert len(first.flush_threads) == len(second.flush_threads) == 1
        assert loop_thread not in first.flush_threads + second.flush_threads
        await asyncio.wait_for(manager.wait_durable(TP, first.append(1)), 5)
        assert first.flush_threads[-1] == loop_thread  # alone again: on the loop
        manager.shutdown()

    asyncio.run(scenario())


def test_an_acks_all_wait_on_a_partition_taken_offline_fails_with_a_storage_error() -> None:
    """A failed log dir takes its partitions offline: a produce waiting for its followers is
    answered KAFKA_STORAGE_ERROR (as Kafka's DelayedProduce finds the partition offline), a
    partition that merely lost its leadership NOT_LEADER_OR_FOLLOWER."""

    async def scenario() -> None:
        log = _Log()
        manager = _manager(log)
        partition = manager.partitions[TP]
        partition.local_node_id = partition.leader_id = 1
        partition.replicas = partition.isr = (1, 2)
        partition.become_leader(now_ms=0)
        offline = manager.wait_replicated(TP, log.append(1), min_insync=2)
        await _settle()
        assert not offline.done()  # (node 2 has not fetched it)
        manager.mark_offline(TP, "log dir /data failed")
        with pytest.raises(KafkaError) as failed:
            await asyncio.wait_for(offline, 5)
        assert failed.value.code == ErrorCode.kafka_storage_error
        assert TP in manager.offline_partitions
        _shutdown(manager, log)

    asyncio.run(scenario())
