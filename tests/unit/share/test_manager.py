"""The SharePartitionManager over a real ReplicaManager and in-memory logs: reads through the
partition read path, leadership changes (a new leader epoch keeps delivery counts and releases
acquisitions; a leadership lost drops the state, and a new one starts at share.auto.offset.reset),
locks running out on the event loop, and parked fetches of closed sessions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from moldau.clock import SYSTEM_CLOCK
from moldau.config.share_groups import (
    READ_UNCOMMITTED,
    AutoOffsetReset,
    ShareGroupConfig,
    ShareGroupSettings,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.replication.replica_manager import PartitionState, ReplicaManager
from moldau.share.manager import (
    ShareFetchParams,
    ShareFetchPartition,
    SharePartitionAnswer,
    SharePartitionKey,
    SharePartitionManager,
)
from moldau.share.share_partition import AcknowledgementBatch, AcquiredRecords
from moldau.storage import LogConfig, LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition

TP = TopicPartition("jobs", 0)
TOPIC_ID = uuid.UUID(int=42)
PARTITION = ShareFetchPartition(TOPIC_ID, 0, TP)
CONFIG = LogConfig()


class Broker:
    """One broker's replica manager over in-memory logs, and its share-partition manager."""

    def __init__(self) -> None:
        self.logs = LogManager(["/data"], fs=MemoryFileSystem(), default_config=CONFIG)
        self.logs.startup()
        self.replicas = ReplicaManager(self.logs, node_id=1)
        self.leader_epoch = 0
        self.lead()
        self.shares = SharePartitionManager(
            self.replicas,
            config=ShareGroupConfig(),
            clock=SYSTEM_CLOCK,
            leader_of=lambda tp: (2, 7),
        )

    def lead(self, *, leader: int = 1, epoch_step: int = 1) -> None:
        self.leader_epoch += epoch_step
        state = PartitionState(
            topic_id=TOPIC_ID,
            leader=leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.leader_epoch,
            replicas=(1, 2),
            isr=(1,) if leader == 1 else (2,),
        )
        self.replicas.become_leader_or_follower(TP, state, CONFIG)
        self.shares_follow()

    def shares_follow(self) -> None:
        if hasattr(self, "shares"):
            self.shares.follow_leadership()

    def produce(self, *batches: int) -> None:
        """One batch of `n` records for each `n`."""
        for count in batches:
            batch = build_batch([NewRecord(value=b"job") for _ in range(count)])
            self.replicas.append_records(TP, batch, required_acks=1)

    def fetch(
        self,
        member: str,
        *,
        max_records: int = 500,
        max_wait_ms: int = 0,
        lock_ms: int = 30_000,
        reset: str = "earliest",
        session: Any = None,
        on_complete: Callable[[list[SharePartitionAnswer]], None] = lambda answers: None,
    ) -> SharePartitionAnswer | None:
        params = ShareFetchParams(
            group_id="g",
            member_id=member,
            settings=ShareGroupSettings(
                session_timeout_ms=45_000,
                heartbeat_interval_ms=5_000,
                record_lock_duration_ms=lock_ms,
                auto_offset_reset=AutoOffsetReset.parse(reset),
                isolation_level=READ_UNCOMMITTED,
            ),
            max_wait_ms=max_wait_ms,
            max_bytes=1 << 20,
            max_records=max_records,
            session=session,
        )
        answers = self.shares.fetch(params, [PARTITION], on_complete)
        return None if answers is None else answers[0]

    def state(self) -> Any:
        return self.shares.share_partition(SharePartitionKey("g", TOPIC_ID, 0))


@pytest.fixture
def broker() -> Iterator[Broker]:
    broker = Broker()
    yield broker
    broker.logs.shutdown()


def run(broker: Broker, scenario: Callable[[], Any]) -> None:
    """Run `scenario` (a coroutine function) on an event loop (lock timers and parked fetches
    need one), then stop the broker's share-partitions and replicas on it."""

    async def main() -> None:
        try:
            await scenario()
        finally:
            broker.shares.stop()
            broker.replicas.shutdown()

    asyncio.run(main())


def acquired(answer: SharePartitionAnswer | None) -> list[tuple[int, int, int]]:
    assert answer is not None and answer.error_code == 0, answer
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in answer.acquired]


def test_a_fetch_acquires_whole_batches_and_sends_only_those(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(3, 3, 3)
        answer = broker.fetch("a", max_records=4)
        assert acquired(answer) == [(0, 5, 1)]  # two whole batches for four records
        assert answer is not None
        assert [b.header.base_offset for b in iter_batches(answer.records)] == [0, 3]
        assert acquired(broker.fetch("b")) == [(6, 8, 1)]
        assert acquired(broker.fetch("c")) == []

    run(broker, scenario)


def test_latest_starts_at_the_end_and_earliest_at_the_log_start(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(5)
        assert acquired(broker.fetch("a", reset="latest")) == []
        assert broker.state().start_offset == 5
        broker.produce(2)
        assert acquired(broker.fetch("a")) == [(5, 6, 1)]  # (the state exists: no reset)

    run(broker, scenario)


def test_a_new_leader_epoch_releases_acquisitions_and_keeps_delivery_counts(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(4)
        assert acquired(broker.fetch("a")) == [(0, 3, 1)]
        broker.shares.acknowledge("g", "a", PARTITION, [AcknowledgementBatch(0, 0, (1,))])
        broker.lead()  # still the leader, one epoch on
        assert acquired(broker.fetch("b")) == [(1, 3, 2)]
        code, _, _ = broker.shares.acknowledge(
            "g", "a", PARTITION, [AcknowledgementBatch(1, 1, (1,))]
        )
        assert code == ErrorCode.invalid_record_state  # a's acquisition did not survive

    run(broker, scenario)


def test_a_lost_leadership_drops_the_state_and_a_new_one_starts_over(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(4)
        assert acquired(broker.fetch("a")) == [(0, 3, 1)]
        broker.shares.acknowledge("g", "a", PARTITION, [AcknowledgementBatch(0, 1, (1,))])
        broker.lead(leader=2)
        assert broker.state() is None
        refused = broker.fetch("a")
        assert refused is not None
        assert (refused.error_code, refused.current_leader) == (
            ErrorCode.not_leader_or_follower,
            (2, 7),
        )
        code, _, leader = broker.shares.acknowledge(
            "g", "a", PARTITION, [AcknowledgementBatch(2, 3, (1,))]
        )
        assert (code, leader) == (ErrorCode.not_leader_or_follower, (2, 7))
        broker.lead()  # back: nothing is known of what happened meanwhile (not durable yet)
        assert acquired(broker.fetch("b")) == [(0, 3, 1)]

    run(broker, scenario)


def test_a_waiting_fetch_gets_the_records_whose_lock_ran_out(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(3)
        assert acquired(broker.fetch("a", lock_ms=50)) == [(0, 2, 1)]
        answered: asyncio.Future[list[SharePartitionAnswer]] = asyncio.Future()
        started = asyncio.get_running_loop().time()
        assert broker.fetch("b", max_wait_ms=5_000, on_complete=answered.set_result) is None
        [answer] = await asyncio.wait_for(answered, 5)
        assert acquired(answer) == [(0, 2, 2)]
        assert asyncio.get_running_loop().time() - started < 2  # the lock, not max_wait

    run(broker, scenario)


def test_a_waiting_fetch_is_answered_by_an_append(broker: Broker) -> None:
    async def scenario() -> None:
        answered: asyncio.Future[list[SharePartitionAnswer]] = asyncio.Future()
        assert broker.fetch("a", max_wait_ms=5_000, on_complete=answered.set_result) is None
        broker.produce(2)
        [answer] = await asyncio.wait_for(answered, 1)
        assert acquired(answer) == [(0, 1, 1)]

    run(broker, scenario)


def test_a_waiting_fetch_of_a_closed_session_acquires_nothing(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(3)
        assert acquired(broker.fetch("a")) == [(0, 2, 1)]
        connection = object()
        session = broker.shares.sessions.open("g", "b", [(TOPIC_ID, 0)], connection)
        answered: asyncio.Future[list[SharePartitionAnswer]] = asyncio.Future()
        parked = broker.fetch(
            "b", max_wait_ms=5_000, session=session, on_complete=answered.set_result
        )
        assert parked is None
        broker.shares.connection_closed(connection)  # b is gone
        broker.shares.release_member("g", "a")
        [answer] = await asyncio.wait_for(answered, 1)
        assert acquired(answer) == []
        assert acquired(broker.fetch("c")) == [(0, 2, 2)]
        assert broker.shares.sessions.get("g", "b") is None

    run(broker, scenario)


def test_a_deleted_group_forgets_its_state(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(2)
        broker.fetch("a")
        broker.shares.forget_group("g")
        assert broker.state() is None

    run(broker, scenario)


def test_acquired_records_are_reported_in_order(broker: Broker) -> None:
    async def scenario() -> None:
        broker.produce(2, 2)
        broker.fetch("a")
        broker.shares.acknowledge("g", "a", PARTITION, [AcknowledgementBatch(0, 3, (2, 1, 2, 1))])
        answer = broker.fetch("b")
        assert answer is not None
        assert answer.acquired == [AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2)]

    run(broker, scenario)
