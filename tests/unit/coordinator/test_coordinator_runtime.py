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


def _commit(runtime: GroupCoordinatorRuntime, offset: int) -> object:
    return runtime.commit_offsets(
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[PartitionCommit(topic="t", partition=0, offset=offset)],
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


def test_a_commit_the_log_cannot_take_for_lack_of_space_is_coordinator_not_available() -> None:
    log = MemoryLog()
    full = True

    async def append(tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]) -> int:
        if full:
            raise KafkaError(ErrorCode.kafka_storage_error, "No space left on device")
        return await log.append(tp, pairs)

    async def scenario() -> None:
        nonlocal full
        config = GroupCoordinatorConfig(offsets_topic_num_partitions=4)
        runtime = GroupCoordinatorRuntime(
            config, append=append, read_records=log.read, clock=ManualClock()
        )
        async with runtime:
            try:
                await _commit(runtime, 5)  # type: ignore[misc]
            except KafkaError as error:  # retriable, and not "ask someone else" forever
                assert error.code == ErrorCode.coordinator_not_available
            else:
                raise AssertionError("expected COORDINATOR_NOT_AVAILABLE")
            full = False
            for _ in range(100):  # the partition reloads from its log, then commits work
                try:
                    await _commit(runtime, 6)  # type: ignore[misc]
                    break
                except KafkaError as error:
                    assert error.code in (
                        ErrorCode.coordinator_load_in_progress,
                        ErrorCode.not_coordinator,
                    )
                    await asyncio.sleep(0.01)
            fetched = runtime.fetch_offsets(group_id="g", topics=[("t", [0])])
            assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 6

    asyncio.run(scenario())


def test_append_errors_map_as_kafka_maps_them_but_storage_is_not_available() -> None:
    from moldau.coordinator.partitioned_runtime import append_error_code

    expected = {
        ErrorCode.kafka_storage_error: ErrorCode.coordinator_not_available,
        ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
        ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
        ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
        ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    }
    for code, answered in expected.items():
        assert append_error_code(KafkaError(code)) == answered
    assert append_error_code(OSError(28, "No space left on device")) == (
        ErrorCode.coordinator_not_available
    )


def test_a_record_no_coordinator_wrote_is_skipped_when_loading() -> None:
    """Found by fuzzing: a short key in __consumer_offsets (written there by a Produce) made the
    load fail with RecordFormatError, leaving the partition loading for ever and a traceback in
    the log; the load now goes on past it."""
    log = MemoryLog()
    partition = TopicPartition("__consumer_offsets", partition_for_group("g", 4))

    async def scenario() -> None:
        async with make_runtime(log) as runtime:
            await runtime.commit_offsets(
                group_id="g",
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                commits=[PartitionCommit(topic="t", partition=0, offset=7, metadata="")],
            )
        log.partitions[partition].insert(0, (b"\x00", b"garbage"))
        async with make_runtime(log) as restarted:
            fetched = restarted.fetch_offsets(group_id="g", topics=[("t", [0])])
            assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 7

    asyncio.run(scenario())


class GatedLog(MemoryLog):
    """Appends wait at a gate: `close()` holds them, `open()` lets them land, `fail_with` makes
    the held ones fail."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_with: Exception | None = None

    async def append(
        self, tp: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]
    ) -> int:
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return await super().append(tp, pairs)


async def _two_members_joined(runtime: GroupCoordinatorRuntime) -> tuple[dict, dict]:
    first_a, first_b = await asyncio.gather(
        runtime.join_group(join_request()), runtime.join_group(join_request())
    )
    return await asyncio.gather(
        runtime.join_group(join_request(first_a["member_id"])),
        runtime.join_group(join_request(first_b["member_id"])),
    )


def _sync(runtime: GroupCoordinatorRuntime, joined: dict, assignments: dict) -> object:
    return runtime.sync_group(
        group_id="g",
        generation_id=joined["generation_id"],
        member_id=joined["member_id"],
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=assignments,
    )


async def _follower_syncing_during_the_leaders_write(
    log: GatedLog, runtime: GroupCoordinatorRuntime
) -> tuple[asyncio.Task, asyncio.Task]:
    """The leader's SyncGroup applied (the group Stable) with its write held at the gate, then
    a follower's SyncGroup: both tasks, neither answered yet."""
    a, b = await _two_members_joined(runtime)
    assert a["generation_id"] == b["generation_id"]
    leader, follower = (a, b) if a["member_id"] == a["leader"] else (b, a)
    log.gate.clear()
    leader_sync = asyncio.ensure_future(
        _sync(runtime, leader, {leader["member_id"]: b"L", follower["member_id"]: b"F"})
    )
    for _ in range(5):
        await asyncio.sleep(0)
    assert runtime.describe_group("g")["group_state"] == "Stable"  # applied, not yet durable
    follower_sync = asyncio.ensure_future(_sync(runtime, follower, {}))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not leader_sync.done() and not follower_sync.done()
    return leader_sync, follower_sync


def test_a_followers_sync_is_answered_only_once_the_leaders_assignment_is_durable() -> None:
    log = GatedLog()

    async def scenario() -> None:
        async with make_runtime(log) as runtime:
            leader_sync, follower_sync = await _follower_syncing_during_the_leaders_write(
                log, runtime
            )
            log.gate.set()
            assert (await leader_sync)["assignment"] == b"L"
            assert (await follower_sync)["assignment"] == b"F"

    asyncio.run(scenario())


def test_a_followers_sync_fails_when_the_leaders_assignment_cannot_be_written() -> None:
    log = GatedLog()

    async def scenario() -> None:
        async with make_runtime(log) as runtime:
            leader_sync, follower_sync = await _follower_syncing_during_the_leaders_write(
                log, runtime
            )
            log.fail_with = KafkaError(ErrorCode.kafka_storage_error, "disk failed")
            log.gate.set()
            for task in (leader_sync, follower_sync):
                try:
                    await task
                except KafkaError as error:
                    assert error.code == ErrorCode.coordinator_not_available
                else:
                    raise AssertionError("an assignment that was never written was answered")

    asyncio.run(scenario())


async def _settle() -> None:
    for _ in range(20):  # the runtime's background loads and unloads take a few turns
        await asyncio.sleep(0)


def _fetched(runtime: GroupCoordinatorRuntime) -> object:
    try:
        answer = runtime.fetch_offsets(group_id="g", topics=[("t", [0])])
    except KafkaError as error:
        return error.code
    return answer["topics"][0]["partitions"][0]["committed_offset"]


def test_a_leader_that_lost_its_partition_mid_write_loads_it_again_only_when_it_leads() -> None:
    """A deposed leader appends a commit to its own log, and the metadata that deposes it
    arrives while the append waits: the coordinator is told it no longer leads, then the append
    fails. Loading the partition back then would read the unreplicated tail its new leader is
    about to truncate, and keep serving it once the node leads again (how chaos pause-leader
    seed 8 can have kept a pending transactional offset that no marker would ever complete, so
    OffsetFetch answered UNSTABLE_OFFSET_COMMIT for good)."""
    log = MemoryLog()
    index = partition_for_group("g", 4)
    tp = TopicPartition("__consumer_offsets", index)
    deposed = False
    runtime: GroupCoordinatorRuntime | None = None

    async def append(at: TopicPartition, pairs: list[tuple[bytes | None, bytes | None]]) -> int:
        offset = await log.append(at, pairs)  # written to this node's log...
        if deposed:  # ...but the new metadata names another leader: never replicated
            assert runtime is not None
            runtime.follow_leadership({})
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return offset

    async def scenario() -> None:
        nonlocal deposed, runtime
        config = GroupCoordinatorConfig(offsets_topic_num_partitions=4)
        runtime = GroupCoordinatorRuntime(
            config, append=append, read_records=log.read, clock=ManualClock()
        )
        await runtime.start(partitions=[index])
        runtime.follow_leadership({index: 1})
        await _commit(runtime, 5)  # type: ignore[misc]
        deposed = True
        try:
            await _commit(runtime, 9)  # type: ignore[misc]
        except KafkaError as error:
            assert error.code == ErrorCode.not_coordinator
        else:
            raise AssertionError("expected NOT_COORDINATOR")
        await _settle()
        assert _fetched(runtime) == ErrorCode.not_coordinator  # not loaded back meanwhile
        assert len(log.partitions[tp]) == 2
        del log.partitions[tp][-1]  # the new leader's log: the follower truncates to it
        deposed = False
        runtime.follow_leadership({index: 3})  # it leads again, in a later epoch
        await _settle()
        assert _fetched(runtime) == 5
        await runtime.stop()

    asyncio.run(scenario())


def test_a_partition_led_again_in_a_new_epoch_is_loaded_again_from_its_log() -> None:
    """Leadership lost and regained between two looks at the metadata: the node never unloaded,
    but the log may have changed under it; a new leader epoch loads it again."""
    log = MemoryLog()
    index = partition_for_group("g", 4)
    tp = TopicPartition("__consumer_offsets", index)

    async def scenario() -> None:
        runtime = make_runtime(log)
        await runtime.start(partitions=[index])
        runtime.follow_leadership({index: 1})
        await _commit(runtime, 5)  # type: ignore[misc]
        await _commit(runtime, 9)  # type: ignore[misc]
        del log.partitions[tp][-1]  # truncated while another node led (epochs 2 and 3)
        runtime.follow_leadership({index: 1})  # same epoch: nothing to do
        await _settle()
        assert _fetched(runtime) == 9
        runtime.follow_leadership({index: 4})
        await _settle()
        assert _fetched(runtime) == 5
        await runtime.stop()

    asyncio.run(scenario())
