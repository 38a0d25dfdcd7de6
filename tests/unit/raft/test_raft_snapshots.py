from moldau.protocol.errors import ErrorCode
from moldau.raft.events import InstallSnapshot, WriteSnapshotChunk
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from moldau.raft.snapshots import MemorySnapshotStore
from tests.unit.raft.harness import CLUSTER_ID, Harness, elect, entries, only_sent

SNAPSHOT = OffsetAndEpoch(epoch=1, offset=3)
CONTENTS = b"the state of the metadata as of offset 3"


class SnapshotHarness(Harness):
    """A Harness whose node has a snapshot store, applying the snapshot actions to it."""

    def __init__(self, **kwargs):
        self.snapshots = MemorySnapshotStore()
        super().__init__(snapshots=self.snapshots, **kwargs)

    def step(self, event, *, at=None):
        actions = super().step(event, at=at)
        for action in actions:
            match action:
                case WriteSnapshotChunk():
                    self.snapshots.write_chunk(action.snapshot_id, action.position, action.data)
                case InstallSnapshot():
                    self.snapshots.complete(action.snapshot_id)
                    self.log.truncate_to_snapshot(action.snapshot_id)
        return actions


def snapshotted_leader() -> SnapshotHarness:
    """Node 1 leads epoch 2 over entries 0-3 (epoch 1) whose first three are in a snapshot."""
    harness = SnapshotHarness(
        log=entries(1, 1, 1, 1),
        state=ElectionState(epoch=1, voters=(1, 2, 3)),
        config=QuorumConfig(snapshot_chunk_bytes=16),
    )
    harness.snapshots.create(SNAPSHOT, CONTENTS)
    harness.log.delete_before_snapshot(SNAPSHOT)
    harness.start()
    elect(harness)
    harness.flush()
    return harness


def fetch(offset: int, last_epoch: int, epoch: int = 2) -> FetchRequest:
    return FetchRequest(
        correlation_id=offset,
        cluster_id=CLUSTER_ID,
        replica_id=2,
        max_wait_ms=0,
        max_bytes=1 << 20,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        log_start_offset=0,
        partition_max_bytes=1 << 20,
    )


def test_a_fetch_from_below_the_log_start_gets_the_newest_snapshot_id():
    harness = snapshotted_leader()
    for offset, last_epoch in [(0, 0), (2, 1)]:
        response = only_sent(harness.receive(2, fetch(offset, last_epoch)), FetchResponse)
        assert response.snapshot_id == SNAPSHOT and response.records == ()
        assert response.log_start_offset == 3
    # At the log start with the snapshot's epoch, the logs match: entries follow.
    response = only_sent(harness.receive(2, fetch(3, 1)), FetchResponse)
    assert response.snapshot_id is None and [e.base_offset for e in response.records] == [3, 4]
    # Parting from the leader's log at its start: only the snapshot can settle it.
    response = only_sent(harness.receive(2, fetch(5, 0)), FetchResponse)
    assert response.snapshot_id == SNAPSHOT


def test_fetch_snapshot_serves_chunks_and_refuses_what_it_cannot():
    harness = snapshotted_leader()

    def ask(snapshot_id, position, epoch=2) -> FetchSnapshotResponse:
        request = FetchSnapshotRequest(
            correlation_id=1,
            cluster_id=CLUSTER_ID,
            replica_id=2,
            max_bytes=1000,
            current_leader_epoch=epoch,
            snapshot_id=snapshot_id,
            position=position,
        )
        return only_sent(harness.receive(2, request), FetchSnapshotResponse)

    first = ask(SNAPSHOT, 0)
    assert (first.size, first.position, first.unaligned_records) == (
        len(CONTENTS),
        0,
        CONTENTS[:16],
    )
    assert ask(SNAPSHOT, 32).unaligned_records == CONTENTS[32:]
    assert ask(SNAPSHOT, 99).partition_error_code == ErrorCode.position_out_of_range
    missing = ask(OffsetAndEpoch(epoch=1, offset=2), 0)
    assert missing.partition_error_code == ErrorCode.snapshot_not_found
    assert ask(SNAPSHOT, 0, epoch=1).partition_error_code == ErrorCode.fenced_leader_epoch


def test_a_follower_fetches_a_snapshot_in_chunks_installs_it_and_fetches_on():
    harness = SnapshotHarness(
        log=entries(1),
        state=ElectionState(epoch=2, leader_id=3, voters=(1, 2, 3)),
    )
    request = only_sent(harness.start(), FetchRequest)
    actions = harness.receive(
        3,
        FetchResponse(
            correlation_id=request.correlation_id,
            high_watermark=4,
            log_start_offset=3,
            current_leader_id=3,
            current_leader_epoch=2,
            snapshot_id=SNAPSHOT,
        ),
    )
    position = 0
    while True:
        ask = only_sent(actions, FetchSnapshotRequest)
        assert (ask.snapshot_id, ask.position) == (SNAPSHOT, position)
        chunk = CONTENTS[position : position + 10]
        actions = harness.receive(
            3,
            FetchSnapshotResponse(
                correlation_id=ask.correlation_id,
                snapshot_id=SNAPSHOT,
                current_leader_id=3,
                current_leader_epoch=2,
                size=len(CONTENTS),
                position=position,
                unaligned_records=chunk,
            ),
        )
        position += len(chunk)
        if position == len(CONTENTS):
            break
        assert harness.node.log_end_offset == 1  # nothing changes until it is whole
    assert InstallSnapshot(snapshot_id=SNAPSHOT) in actions
    assert harness.snapshots.load(SNAPSHOT) == CONTENTS
    assert (harness.log.log_start, harness.log.end_offset) == (SNAPSHOT, 3)
    assert harness.node.high_watermark == 3
    after = only_sent(actions, FetchRequest)
    assert (after.fetch_offset, after.last_fetched_epoch, after.log_start_offset) == (3, 1, 3)


def test_a_restarted_node_counts_its_snapshot_as_committed():
    harness = SnapshotHarness(
        log=entries(1, 1, 1, 1), state=ElectionState(epoch=1, voters=(1, 2, 3))
    )
    harness.snapshots.create(SNAPSHOT, CONTENTS)
    harness.log.delete_before_snapshot(SNAPSHOT)
    harness.start()
    assert harness.node.high_watermark == 3
