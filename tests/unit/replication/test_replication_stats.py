"""What the data path counts for the node's metrics (`ReplicationStats`): records and bytes
appended per topic (not an idempotent retry's), bytes answered to consumers, ISR shrinks and
expands of a led partition, and the acks=all produces waiting."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.protocol.records import NewRecord, build_batch
from moldau.replication.consumer_fetch import ConsumerFetchParams, PartitionFetch
from moldau.replication.replica_manager import PartitionState, ReplicaManager
from moldau.replication.stats import ReplicationStats
from moldau.storage import LogConfig, LogManager, MemoryFileSystem
from moldau.types import TopicPartition

TP = TopicPartition("events", 0)
SMALL_INDEXES = LogConfig(segment_index_bytes=4096)  # in-memory files are preallocated for real


def _leader(isr: tuple[int, ...] = (1,), replicas: tuple[int, ...] = (1,)) -> ReplicaManager:
    log_manager = LogManager(
        ["/data"], fs=MemoryFileSystem(), clock=ManualClock(), default_config=SMALL_INDEXES
    )
    log_manager.startup()
    manager = ReplicaManager(log_manager, node_id=1)
    state = PartitionState(
        topic_id=None, leader=1, leader_epoch=1, partition_epoch=1, replicas=replicas, isr=isr
    )
    manager.become_leader_or_follower(TP, state, SMALL_INDEXES)
    return manager


def _batch(count: int, *, sequence: int = -1) -> bytes:
    return build_batch(
        [NewRecord(key=None, value=b"x" * 10) for _ in range(count)],
        producer_id=7 if sequence >= 0 else -1,
        producer_epoch=0 if sequence >= 0 else -1,
        base_sequence=sequence,
    )


def test_records_and_bytes_appended_count_per_topic_but_not_a_retried_batch() -> None:
    manager = _leader()
    first, second = _batch(3, sequence=0), _batch(2, sequence=3)
    manager.append_records(TP, first, required_acks=1)
    manager.append_records(TP, second, required_acks=1)
    manager.append_records(TP, second, required_acks=1)  # the producer's retry: a duplicate
    traffic = manager.stats.topics["events"]
    assert (traffic.messages_in, traffic.bytes_in) == (5, len(first) + len(second))
    assert traffic.bytes_out == 0


def test_bytes_answered_to_a_consumer_count_as_bytes_out() -> None:
    async def scenario() -> None:
        manager = _leader()
        batch = _batch(4)
        manager.append_records(TP, batch, required_acks=1)
        params = ConsumerFetchParams(
            isolation_level=0, max_bytes=1 << 20, min_bytes=1, max_wait_ms=0, allow_follower=False
        )
        fetches = [PartitionFetch(TP, 0, fetch_offset=0, max_bytes=1 << 20)]
        answers = manager.fetch(fetches, params, lambda _answers: None)
        assert answers is not None and answers[0].records
        assert manager.stats.topics["events"].bytes_out == len(batch)
        manager.shutdown()

    asyncio.run(scenario())


def test_a_parked_fetch_counts_what_it_is_answered_once() -> None:
    async def scenario() -> None:
        manager = _leader()
        params = ConsumerFetchParams(
            isolation_level=0,
            max_bytes=1 << 20,
            min_bytes=1,
            max_wait_ms=5_000,
            allow_follower=False,
        )
        answered: list[object] = []
        fetches = [PartitionFetch(TP, 0, fetch_offset=0, max_bytes=1 << 20)]
        assert manager.fetch(fetches, params, answered.append) is None  # parked: nothing yet
        batch = _batch(2)
        manager.append_records(TP, batch, required_acks=1)  # wakes it, in this call
        assert len(answered) == 1
        assert manager.stats.topics["events"].bytes_out == len(batch)
        manager.shutdown()

    asyncio.run(scenario())


def test_isr_changes_of_a_continuing_leadership_count_as_shrinks_and_expands() -> None:
    manager = _leader(isr=(1, 2, 3), replicas=(1, 2, 3))

    def committed(isr: tuple[int, ...], partition_epoch: int) -> None:
        state = PartitionState(
            topic_id=None,
            leader=1,
            leader_epoch=1,
            partition_epoch=partition_epoch,
            replicas=(1, 2, 3),
            isr=isr,
        )
        manager.become_leader_or_follower(TP, state, SMALL_INDEXES)

    committed((1, 2), 2)  # from the metadata (the controller, or this leader's change)
    manager.isr_change_settled(TP, isr=(1, 2), leader_epoch=1, partition_epoch=2)  # the same
    assert (manager.stats.isr_shrinks, manager.stats.isr_expands) == (1, 0)
    manager.isr_change_settled(TP, isr=(1, 2, 3), leader_epoch=1, partition_epoch=3)
    committed((1, 2, 3), 3)  # its record, after the answer: already counted
    assert (manager.stats.isr_shrinks, manager.stats.isr_expands) == (1, 1)
    # A new leadership starts with the ISR it is given: not a change of this leader's.
    state = PartitionState(
        topic_id=None, leader=1, leader_epoch=2, partition_epoch=4, replicas=(1, 2, 3), isr=(1,)
    )
    manager.become_leader_or_follower(TP, state, SMALL_INDEXES)
    assert (manager.stats.isr_shrinks, manager.stats.isr_expands) == (1, 1)


def test_acks_all_produces_count_while_they_wait() -> None:
    async def scenario() -> None:
        manager = _leader(isr=(1, 2), replicas=(1, 2))  # the follower has to fetch first
        result = manager.append_records(TP, _batch(1), required_acks=-1)
        codes: list[list[int]] = []
        manager.when_acknowledged([(TP, result.last_offset)], 0.05, codes.append)
        assert (manager.stats.delayed_produces, manager.stats.delayed_produce_partitions) == (1, 1)
        await asyncio.sleep(0.2)  # timed out: answered, no longer waiting
        assert codes and (
            manager.stats.delayed_produces,
            manager.stats.delayed_produce_partitions,
        ) == (0, 0)
        manager.shutdown()

    asyncio.run(scenario())


def test_counters_of_deleted_topics_are_forgotten() -> None:
    stats = ReplicationStats()
    stats.traffic("kept").messages_in += 1
    stats.traffic("deleted").messages_in += 1
    stats.forget_topics_except({"kept"})
    assert list(stats.topics) == ["kept"]
