import pytest

from moldau.raft.node import (
    AppendToLog,
    ClientAppend,
    CommitUpTo,
    FlushLog,
    LeaderChanged,
    LogFlushed,
    NotLeaderError,
    PersistElectionState,
    RaftNode,
    Resign,
    Role,
    Start,
    Tick,
)
from moldau.raft.quorum_state import ElectionState


def started(**start):
    node = RaftNode(node_id=1, voters=(1,))
    actions = node.step(
        Start(
            election_state=start.get("state"),
            log_end_offset=start.get("end", 0),
            last_epoch=start.get("last_epoch", 0),
        ),
        0.0,
    )
    return node, actions


def test_a_single_voter_elects_itself_and_starts_its_epoch_with_a_control_entry():
    node, actions = started()
    assert node.role is Role.LEADER and node.epoch == 1 and node.leader_id == 1
    kinds = [type(a) for a in actions]
    assert kinds == [
        PersistElectionState,
        PersistElectionState,
        LeaderChanged,
        AppendToLog,
        FlushLog,
    ]
    # The vote is persisted before the node acts as leader.
    assert actions[0].state == ElectionState(epoch=1, leader_id=None, voted_id=1, voters=(1,))
    assert actions[1].state == ElectionState(epoch=1, leader_id=1, voted_id=1, voters=(1,))
    entry = actions[3].entry
    assert entry.is_control and entry.base_offset == 0 and entry.epoch == 1


def test_a_restart_moves_to_a_higher_epoch_than_stored_or_logged():
    node, _ = started(
        state=ElectionState(epoch=4, leader_id=1, voted_id=1, voters=(1,)), end=10, last_epoch=3
    )
    assert node.epoch == 5
    node, actions = started(state=None, end=10, last_epoch=7)
    assert node.epoch == 8
    assert actions[3].entry.base_offset == 10


def test_appends_get_consecutive_offsets_and_commit_once_flushed():
    node, _ = started()
    first = node.step(ClientAppend(records=(b"a", b"b")), 0.0)
    second = node.step(ClientAppend(records=(b"c",)), 0.0)
    assert [a.entry.base_offset for a in first + second if isinstance(a, AppendToLog)] == [1, 3]
    assert node.log_end_offset == 4
    assert node.step(LogFlushed(flushed_offset=3), 0.0) == [CommitUpTo(high_watermark=3)]
    assert node.step(LogFlushed(flushed_offset=3), 0.0) == []  # the high watermark never repeats
    assert node.step(LogFlushed(flushed_offset=4), 0.0) == [CommitUpTo(high_watermark=4)]
    assert node.high_watermark == 4


def test_nothing_commits_until_the_entry_of_the_new_epoch_is_durable():
    node, _ = started(end=5, last_epoch=1)
    assert node.step(LogFlushed(flushed_offset=5), 0.0) == []
    assert node.step(LogFlushed(flushed_offset=6), 0.0) == [CommitUpTo(high_watermark=6)]


def test_a_resigned_leader_refuses_appends_but_finishes_its_flushes():
    node, _ = started()
    node.step(ClientAppend(records=(b"x",)), 0.0)
    assert node.step(Resign(), 0.0) == []
    with pytest.raises(NotLeaderError):
        node.step(ClientAppend(records=(b"y",)), 0.0)
    assert node.step(LogFlushed(flushed_offset=2), 0.0) == [CommitUpTo(high_watermark=2)]
    assert node.step(Tick(), 1.0) == []


def test_a_quorum_of_several_voters_needs_its_log_to_start():
    node = RaftNode(node_id=1, voters=(1, 2, 3))
    with pytest.raises(ValueError):
        node.step(Start(election_state=None, log_end_offset=0, last_epoch=0), 0.0)
