"""The asyncio runtime over an in-memory `__consumer_offsets`."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.coordinator.classic import JoinGroupRequest
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.offsets import PartitionCommit
from moldau.coordinator.runtime import (
    GroupCoordinatorRuntime,
    java_string_hash_code,
    partition_for_group,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition
from tests.unit.coordinator.harness import subscription


class MemoryLog:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, list[tuple[bytes | None, bytes | None]]] = {}
        self.appends = 0

    async def append(
        self, tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]
    ) -> int:
        self.appends += 1
        await asyncio.sleep(0)  # durability takes a turn of the loop
        log = self.partitions.setdefault(tp, [])
        log.extend(pairs)
        return len(log) - 1

    def read(self, tp: TopicPartition) -> list[tuple[bytes | None, bytes | None]]:
        return list(self.partitions.get(tp, []))


def make_runtime(log: MemoryLog) -> GroupCoordinatorRuntime:
    config = GroupCoordinatorConfig(
        offsets_topic_num_partitions=4, group_initial_rebalance_delay_ms=0
    )
    return GroupCoordinatorRuntime(
        config, append=log.append, read_records=log.read, clock=ManualClock()
    )


def join_request(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[("range", subscription("t"))],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id="c",
    )


def test_group_partition_matches_kafka_hash() -> None:
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("polygenelubricants") == -(1 << 31)
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("hello", 50) == 99162322 % 50
    assert partition_for_group("my-group", 50) == abs(java_string_hash_code("my-group")) % 50


def test_join_sync_commit_and_reload_from_log() -> None:
    log = MemoryLog()

    async def scenario() -> None:
        async with make_runtime(log) as runtime:
            first = await runtime.join_group(join_request())
            assert first["error_code"] == ErrorCode.member_id_required
            joined = await runtime.join_group(join_request(first["member_id"]))
            member_id = joined["member_id"]
            synced = await runtime.sync_group(
                group_id="g",
                generation_id=joined["generation_id"],
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments={member_id: b"A"},
            )
            assert synced["assignment"] == b"A"
            committed = await runtime.commit_offsets(
                group_id="g",
                generation_id=joined["generation_id"],
                member_id=member_id,
                group_instance_id=None,
                commits=[PartitionCommit(topic="t", partition=0, offset=42, metadata="m")],
            )
            assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.none
        async with make_runtime(log) as restarted:
            fetched = restarted.fetch_offsets(group_id="g", topics=[("t", [0, 1])])
            offsets = [p["committed_offset"] for p in fetched["topics"][0]["partitions"]]
            assert offsets == [42, -1]
            assert restarted.describe_group("g")["group_state"] == "Stable"

    asyncio.run(scenario())
    partition = partition_for_group("g", 4)
    assert len(log.partitions[TopicPartition("__consumer_offsets", partition)]) == 2


def test_concurrent_commits_share_appends_and_keep_order() -> None:
    log = MemoryLog()

    async def scenario() -> None:
        async with make_runtime(log) as runtime:
            commits = [
                runtime.commit_offsets(
                    group_id="g",
                    generation_id=-1,
                    member_id="",
                    group_instance_id=None,
                    commits=[PartitionCommit(topic="t", partition=0, offset=offset)],
                )
                for offset in range(20)
            ]
            await asyncio.gather(*commits)
            fetched = runtime.fetch_offsets(group_id="g", topics=[("t", [0])])
            assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 19
        async with make_runtime(log) as restarted:
            fetched = restarted.fetch_offsets(group_id="g", topics=[("t", [0])])
            assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 19

    asyncio.run(scenario())
    assert log.appends < 20


def test_unloaded_partition_is_not_coordinator() -> None:
    log = MemoryLog()

    async def scenario() -> None:
        runtime = make_runtime(log)
        await runtime.start(partitions=[])
        try:
            runtime.describe_group("g")
        except KafkaError as error:
            assert error.code == ErrorCode.not_coordinator
        else:
            raise AssertionError("expected NOT_COORDINATOR")
        await runtime.stop()

    asyncio.run(scenario())


def test_timers_run_on_the_event_loop() -> None:
    """The initial rebalance delay completes a parked join from a loop timer."""
    log = MemoryLog()
    config = GroupCoordinatorConfig(
        offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=50
    )

    async def scenario() -> None:
        runtime = GroupCoordinatorRuntime(config, append=log.append, read_records=log.read)
        async with runtime:
            first = await runtime.join_group(join_request())
            joined = await asyncio.wait_for(
                runtime.join_group(join_request(first["member_id"])), timeout=10
            )
            assert (joined["error_code"], joined["generation_id"]) == (ErrorCode.none, 1)

    asyncio.run(scenario())
