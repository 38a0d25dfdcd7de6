import asyncio
import logging
import threading

import pytest

from moldau.clock import ManualClock
from moldau.raft.driver import REFUSAL_LOG_INTERVAL_S, RaftDriver, RefusalLog
from moldau.raft.events import Receive, Refused
from moldau.raft.file_log import FileReplicatedLog
from moldau.raft.file_snapshots import FileSnapshotStore
from moldau.raft.log import LogEntry, MemoryReplicatedLog
from moldau.raft.messages import BeginQuorumEpochResponse
from moldau.raft.node import NotLeaderError, RaftNode, RaftSafetyError
from moldau.raft.quorum_state import MemoryQuorumStateStore
from moldau.raft.snapshots import MemorySnapshotStore


class RecordingListener:
    def __init__(self):
        self.committed: list[LogEntry] = []
        self.leaders: list[tuple[int | None, int]] = []

    def handle_commit(self, entries):
        self.committed.extend(entries)

    def handle_leader_change(self, leader_id, epoch):
        self.leaders.append((leader_id, epoch))


class GatedLog(MemoryReplicatedLog):
    """A log whose fsyncs wait until the test opens the gate, and that counts them."""

    def __init__(self, entries=()):
        self.gate = threading.Event()
        self.gate.set()
        self.flushes = 0
        super().__init__(entries)

    def flush(self):
        self.gate.wait(timeout=10)
        self.flushes += 1
        return super().flush()


def make_driver(log=None, store=None):
    listener = RecordingListener()
    driver = RaftDriver(
        node=RaftNode(node_id=1, voters=(1,)),
        log=log if log is not None else GatedLog(),
        quorum_state_store=store if store is not None else MemoryQuorumStateStore(),
        listener=listener,
        clock=ManualClock(),
    )
    return driver, listener


def test_start_commits_the_existing_log_and_hands_it_over_in_order():
    async def scenario():
        existing = [
            LogEntry(base_offset=0, epoch=1, records=(b"leader",), is_control=True),
            LogEntry(base_offset=1, epoch=1, records=(b"a", b"b")),
        ]
        store = MemoryQuorumStateStore()
        driver, listener = make_driver(GatedLog(existing), store)
        await driver.start()
        assert listener.leaders == [(1, 2)]
        assert store.state.epoch == 2 and store.state.leader_id == 1
        assert [(e.base_offset, e.is_control) for e in listener.committed] == [
            (0, True),
            (1, False),
            (3, True),
        ]
        await driver.stop()

    asyncio.run(scenario())


def test_appends_made_during_an_fsync_share_the_next_one():
    async def scenario():
        log = GatedLog()
        driver, listener = make_driver(log)
        await driver.start()
        flushes_after_start = log.flushes
        log.gate.clear()
        first = driver.append([b"1"])
        await asyncio.sleep(0)  # let the flush task start and block on the gate
        second = driver.append([b"2"])
        third = driver.append([b"3", b"4"])
        assert not first.done()
        log.gate.set()
        assert await asyncio.gather(first, second, third) == [1, 2, 4]
        # One fsync after the gate opened covers all three appends.
        assert log.flushes - flushes_after_start == 1
        assert [e.records for e in listener.committed if not e.is_control] == [
            (b"1",),
            (b"2",),
            (b"3", b"4"),
        ]
        await driver.stop()

    asyncio.run(scenario())


def test_a_failed_fsync_fails_the_waiters_and_later_appends():
    class BrokenLog(MemoryReplicatedLog):
        broken = False

        def flush(self):
            if self.broken:
                raise OSError("disk gone")
            return super().flush()

    async def scenario():
        log = BrokenLog()
        driver, _ = make_driver(log)
        await driver.start()
        log.broken = True
        with pytest.raises(OSError):
            await driver.append([b"x"])
        with pytest.raises(RuntimeError):
            driver.append([b"y"])

    asyncio.run(scenario())


def test_a_stopped_driver_refuses_appends():
    async def scenario():
        driver, _ = make_driver()
        await driver.start()
        await driver.stop()
        with pytest.raises((RuntimeError, NotLeaderError)):
            driver.append([b"x"])

    asyncio.run(scenario())


def test_a_restart_loads_the_newest_snapshot_and_delivers_only_what_follows_it():
    class SnapshotListener(RecordingListener):
        def __init__(self):
            super().__init__()
            self.snapshots = []

        def handle_snapshot(self, snapshot_id, contents):
            self.snapshots.append((snapshot_id, contents))

    async def scenario():
        log, store, snapshots = GatedLog(), MemoryQuorumStateStore(), MemorySnapshotStore()
        driver = RaftDriver(
            node=RaftNode(node_id=1, voters=(1,)),
            log=log,
            quorum_state_store=store,
            listener=RecordingListener(),
            clock=ManualClock(),
            snapshots=snapshots,
        )
        await driver.start()
        await driver.append([b"a"])
        snapshot_id = driver.create_snapshot(2, b"state with a")
        with pytest.raises(ValueError):
            driver.create_snapshot(9, b"not committed yet")
        await driver.append([b"b"])
        await driver.stop()

        listener = SnapshotListener()
        restarted = RaftDriver(
            node=RaftNode(node_id=1, voters=(1,)),
            log=log,
            quorum_state_store=store,
            listener=listener,
            clock=ManualClock(),
            snapshots=snapshots,
        )
        await restarted.start()
        assert listener.snapshots == [(snapshot_id, b"state with a")]
        assert [e.records for e in listener.committed if not e.is_control] == [(b"b",)]
        await restarted.stop()

    asyncio.run(scenario())


def test_an_entry_a_trim_to_a_snapshot_made_durable_before_its_flush_ran_still_commits(tmp_path):
    """Trimming the file log to a snapshot rewrites and fsyncs the entries it keeps. An entry
    appended just before, whose flush task had not run yet, finds nothing left to flush: the
    node must still hear that it is durable, or its commit never comes (a controller's write
    waited forever when its snapshot thread finished at that moment)."""

    async def scenario():
        log = FileReplicatedLog(str(tmp_path))
        snapshots = FileSnapshotStore(str(tmp_path))
        driver = RaftDriver(
            node=RaftNode(node_id=1, voters=(1,), log=log, snapshots=snapshots),
            log=log,
            quorum_state_store=MemoryQuorumStateStore(),
            listener=RecordingListener(),
            clock=ManualClock(),
            snapshots=snapshots,
        )
        await driver.start()
        await driver.append([b"a"])
        snapshot_id = driver.snapshot_id_for(2)
        snapshots.create(snapshot_id, b"state with a")  # as the snapshot thread does
        appended = driver.append([b"b"])
        # Before the flush task runs: as the snapshot task does once its thread finished.
        assert driver.trim_log_to_snapshot(snapshot_id)
        assert log.flushed_offset == log.end_offset
        assert await asyncio.wait_for(appended, timeout=5) == 2
        await driver.stop()

    asyncio.run(scenario())


class FailingNode(RaftNode):
    """A node with a bug: any message it receives breaks an invariant."""

    def step(self, event, now):
        if isinstance(event, Receive):
            raise RaftSafetyError("an invariant broke")
        return super().step(event, now)


def test_a_node_that_fails_tells_on_fatal_once_in_one_line_and_takes_no_more_part():
    async def scenario():
        listener = RecordingListener()
        driver = RaftDriver(
            node=FailingNode(node_id=1, voters=(1,)),
            log=GatedLog(),
            quorum_state_store=MemoryQuorumStateStore(),
            listener=listener,
            clock=ManualClock(),
        )
        fatal: list[str] = []
        driver.on_fatal = fatal.append
        await driver.start()
        message = BeginQuorumEpochResponse(correlation_id=1, leader_id=None, leader_epoch=1)
        driver.receive(2, message)
        driver.receive(2, message)
        assert fatal == ["the metadata quorum node failed: RaftSafetyError: an invariant broke"]
        with pytest.raises(RuntimeError, match="the metadata log failed"):
            driver.append([b"x"])
        await driver.stop()

    asyncio.run(scenario())


def test_refused_messages_are_logged_once_a_minute_per_kind_and_sender(caplog):
    clock = ManualClock()
    refusals = RefusalLog(clock)
    lie = Refused(source_id=2, kind="leader", reason="node 2 named as leader of epoch 1")
    with caplog.at_level(logging.WARNING, logger="moldau.raft.driver"):
        for _ in range(5):
            refusals.record(lie)
        refusals.record(Refused(source_id=3, kind="leader", reason="node 3 too"))
        clock.advance(int(REFUSAL_LOG_INTERVAL_S * 1000))
        refusals.record(lie)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused a quorum message: node 2 named as leader of epoch 1",
        "refused a quorum message: node 3 too",
        "refused a quorum message: node 2 named as leader of epoch 1 (4 more like it since "
        "the last)",
    ]
    assert refusals.counts == {"leader": 7}
