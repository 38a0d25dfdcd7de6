import asyncio
import os

import pytest

from moldau.clock import ManualClock
from moldau.raft.driver import MissingSnapshotError, RaftDriver
from moldau.raft.file_log import FileReplicatedLog
from moldau.raft.file_snapshots import (
    FileSnapshotStore,
    SnapshotCorruptError,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.node import RaftNode
from moldau.raft.quorum_state import MemoryQuorumStateStore
from tests.unit.raft.test_raft_driver import RecordingListener

FIRST = OffsetAndEpoch(epoch=1, offset=10)
SECOND = OffsetAndEpoch(epoch=2, offset=25)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def files(directory):
    return sorted(os.listdir(directory))


def test_a_snapshot_is_named_as_kafka_names_it_and_reads_back_after_a_reopen(tmp_path):
    store = FileSnapshotStore(str(tmp_path))
    store.create(SECOND, b"the image as of offset 25")
    assert files(tmp_path) == ["00000000000000000025-0000000002.checkpoint"]
    assert parse_snapshot_file_name(snapshot_file_name(SECOND)) == (SECOND, ".checkpoint")
    reopened = FileSnapshotStore(str(tmp_path))
    assert reopened.latest_snapshot_id() == SECOND
    assert reopened.size(SECOND) == len(b"the image as of offset 25")
    assert reopened.read(SECOND, 4, 5) == b"image"
    assert reopened.read(SECOND, 20, 100) == b"et 25"
    assert reopened.load(SECOND) == b"the image as of offset 25"
    assert reopened.size(FIRST) is None


def test_chunks_stay_a_partial_file_until_complete_and_a_crash_drops_them(tmp_path):
    store = FileSnapshotStore(str(tmp_path))
    store.create(FIRST, b"older")
    store.write_chunk(SECOND, 0, b"from the ")
    store.write_chunk(SECOND, 9, b"leader")
    with pytest.raises(ValueError):
        store.write_chunk(SECOND, 3, b"out of place")
    assert store.latest_snapshot_id() == FIRST  # invisible until complete
    [partial] = [name for name in files(tmp_path) if name.endswith(".checkpoint.part")]
    assert partial.startswith("00000000000000000025-0000000002-")
    # The process dies before the last chunk: the next start forgets the partial file.
    crashed = FileSnapshotStore(str(tmp_path))
    assert crashed.latest_snapshot_id() == FIRST
    assert files(tmp_path) == [snapshot_file_name(FIRST)]
    # A transfer started afresh and completed becomes the newest snapshot, durably.
    crashed.write_chunk(SECOND, 0, b"from the ")
    crashed.write_chunk(SECOND, 9, b"leader")
    crashed.complete(SECOND)
    assert FileSnapshotStore(str(tmp_path)).load(SECOND) == b"from the leader"


@pytest.mark.parametrize(
    "damage",
    ["flip a byte", "cut the trailer", "cut the contents", "empty file"],
)
def test_a_damaged_newest_snapshot_is_set_aside_and_never_loaded(tmp_path, damage):
    store = FileSnapshotStore(str(tmp_path))
    store.create(FIRST, b"older, intact")
    store.create(SECOND, b"newer, about to be damaged")
    path = tmp_path / snapshot_file_name(SECOND)
    data = bytearray(path.read_bytes())
    if damage == "flip a byte":
        data[3] ^= 0x40
    elif damage == "cut the trailer":
        data = data[:-5]
    elif damage == "cut the contents":
        data = data[:4] + data[10:]
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotCorruptError):
        store.load(SECOND)
    reopened = FileSnapshotStore(str(tmp_path))
    assert reopened.latest_snapshot_id() == FIRST
    assert reopened.damaged == [str(path)]
    assert (tmp_path / "00000000000000000025-0000000002.checkpoint.damaged").exists()
    assert reopened.load(FIRST) == b"older, intact"


def test_older_snapshots_go_once_the_log_starts_at_a_newer_one_unless_being_read(tmp_path):
    clock = Clock()
    store = FileSnapshotStore(str(tmp_path), reader_grace_s=60, monotonic=clock)
    store.create(FIRST, b"first")
    store.create(SECOND, b"second")
    store.read(FIRST, 0, 2)  # a follower is fetching it in chunks
    clock.now += 30
    assert store.delete_before(SECOND) == []
    assert store.snapshot_ids() == [FIRST, SECOND]
    clock.now += 31
    assert store.delete_before(SECOND) == [FIRST]
    assert files(tmp_path) == [snapshot_file_name(SECOND)]
    assert store.delete_before(SECOND) == []


def test_leftovers_of_a_crash_while_deleting_are_removed_at_open(tmp_path):
    (tmp_path / "00000000000000000010-0000000001.checkpoint.deleted").write_bytes(b"x")
    (tmp_path / "metadata.log").write_bytes(b"")
    store = FileSnapshotStore(str(tmp_path))
    assert store.latest_snapshot_id() is None
    assert files(tmp_path) == ["metadata.log"]


def _driver(directory, listener=None):
    return RaftDriver(
        node=RaftNode(node_id=1, voters=(1,)),
        log=FileReplicatedLog(directory),
        quorum_state_store=MemoryQuorumStateStore(),
        listener=listener or RecordingListener(),
        clock=ManualClock(),
        snapshots=FileSnapshotStore(directory),
    )


def test_a_snapshot_written_off_the_loop_trims_the_log_and_a_restart_starts_from_it(tmp_path):
    directory = str(tmp_path / "__cluster_metadata-0")

    class SnapshotListener(RecordingListener):
        def __init__(self):
            super().__init__()
            self.snapshots = []

        def handle_snapshot(self, snapshot_id, contents):
            self.snapshots.append((snapshot_id, contents))

    async def scenario():
        driver = _driver(directory)
        await driver.start()
        await driver.append([b"a"])
        await driver.append([b"b"])
        first = driver.create_snapshot(2, b"state with a")
        snapshot_id = driver.snapshot_id_for(3)
        await asyncio.get_running_loop().run_in_executor(
            None, driver.snapshots.create, snapshot_id, b"state with a and b"
        )
        assert driver.trim_log_to_snapshot(snapshot_id)
        assert not driver.trim_log_to_snapshot(first)  # the log is past it already
        assert driver.snapshots.snapshot_ids() == [snapshot_id]
        assert driver.log.log_start == snapshot_id
        with pytest.raises(ValueError):
            driver.snapshot_id_for(3)  # that snapshot exists already
        await driver.append([b"c"])
        await driver.stop()

        listener = SnapshotListener()
        restarted = _driver(directory, listener)
        await restarted.start()
        assert listener.snapshots == [(snapshot_id, b"state with a and b")]
        assert [e.records for e in listener.committed if not e.is_control] == [(b"c",)]
        await restarted.stop()

    asyncio.run(scenario())


def test_a_crash_between_storing_a_snapshot_and_trimming_the_log_is_finished_at_start(tmp_path):
    directory = str(tmp_path / "__cluster_metadata-0")

    async def scenario():
        driver = _driver(directory)
        await driver.start()
        await driver.append([b"a"])
        await driver.append([b"b"])
        snapshot_id = driver.snapshot_id_for(2)
        driver.snapshots.create(snapshot_id, b"state with a")  # ... and the process dies
        await driver.stop()

        restarted = _driver(directory)
        await restarted.start()
        assert restarted.log.log_start == snapshot_id
        assert [e.records for e in restarted.listener.committed if not e.is_control] == [(b"b",)]
        await restarted.stop()

    asyncio.run(scenario())


def test_a_log_that_starts_after_every_snapshot_refuses_to_start(tmp_path):
    directory = str(tmp_path / "__cluster_metadata-0")

    async def scenario():
        driver = _driver(directory)
        await driver.start()
        await driver.append([b"a"])
        snapshot_id = driver.create_snapshot(2, b"state with a")
        await driver.stop()
        os.remove(os.path.join(directory, snapshot_file_name(snapshot_id)))
        with pytest.raises(MissingSnapshotError, match=r"only meta\.properties"):
            await _driver(directory).start()

    asyncio.run(scenario())
