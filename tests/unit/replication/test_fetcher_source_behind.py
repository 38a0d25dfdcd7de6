"""A follower whose new leader has not yet applied the metadata that made it leader: the leader
answers UNKNOWN_LEADER_EPOCH (the epoch is checked before the role, as in Kafka), and the
follower asks again within milliseconds instead of after `replica.fetch.backoff.ms`."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from moldau.replication.partition import Partition
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition

TP = TopicPartition("orders", 0)


def _partition(*, leader: int, epoch: int, local: int) -> Partition:
    logs = LogManager(["/d"], fs=MemoryFileSystem(), clock=ManualClock())
    log = logs.get_or_create_log(TP, LogConfig())
    return Partition(TP, log, leader_id=leader, leader_epoch=epoch, local_node_id=local)


def test_a_replica_behind_the_requested_epoch_answers_unknown_leader_epoch_before_its_role() -> (
    None
):
    # Broker 2 still follows broker 1 at epoch 4; the follower already knows 2 leads epoch 5.
    behind = _partition(leader=1, epoch=4, local=2)
    with pytest.raises(KafkaError) as raised:
        behind.check_leader(5)
    assert raised.value.code == ErrorCode.unknown_leader_epoch
    with pytest.raises(KafkaError) as raised:
        behind.check_leader(3)
    assert raised.value.code == ErrorCode.fenced_leader_epoch
    with pytest.raises(KafkaError) as raised:
        behind.check_leader(4)
    assert raised.value.code == ErrorCode.not_leader_or_follower


class _Source:
    """The new leader's connection: UNKNOWN_LEADER_EPOCH for its first answers, then nothing
    new; it keeps the time of every fetch."""

    is_open = True

    def __init__(self, behind_for: int) -> None:
        self.behind_for = behind_for
        self.fetched_at: list[float] = []

    async def request(self, _api_key: int, _data: Any, **_options: Any) -> Any:
        self.fetched_at.append(time.monotonic())
        code = ErrorCode.unknown_leader_epoch if len(self.fetched_at) <= self.behind_for else 0
        answer = SimpleNamespace(
            partition_index=TP.partition, error_code=int(code), records=b"",
            high_watermark=0, log_start_offset=0, diverging_epoch=None,
        )  # fmt: skip
        if not code:
            await asyncio.sleep(0.05)  # (a fetch with nothing new waits at the leader)
        return SimpleNamespace(
            error_code=0, responses=[SimpleNamespace(topic=TP.topic, partitions=[answer])]
        )

    async def close(self) -> None:
        pass


def test_the_follower_asks_a_source_behind_it_again_within_milliseconds() -> None:
    async def run() -> list[float]:
        source = _Source(behind_for=3)

        async def connect(_broker: int) -> _Source:
            return source

        async def flush(_tp: TopicPartition, _partition: Partition) -> None:
            pass

        manager = ReplicaFetcherManager(
            node_id=3, connect=connect, flush=flush, config=FetcherConfig(backoff_ms=1000)
        )
        manager.add_partition(TP, _partition(leader=2, epoch=5, local=3), leader=2)
        deadline = time.monotonic() + 5
        while len(source.fetched_at) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await manager.close()
        return source.fetched_at

    fetched_at = asyncio.run(run())
    assert len(fetched_at) >= 5
    # Three answers UNKNOWN_LEADER_EPOCH: asked again after 20, 40 and 80 ms, not after 1 s each.
    assert fetched_at[3] - fetched_at[0] < 0.5
