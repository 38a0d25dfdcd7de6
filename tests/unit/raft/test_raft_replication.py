import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft.events import (
    AppendToLog,
    ClientAppend,
    CommitUpTo,
    FlushLog,
    Refused,
    Tick,
    TruncateLog,
)
from moldau.raft.log import LogEntry, OffsetAndEpoch
from moldau.raft.messages import FetchRequest, FetchResponse
from moldau.raft.node import Role
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from tests.unit.raft.harness import (
    Harness,
    elect,
    entries,
    fetch,
    only_sent,
    sent,
)


def leader_with(log_epochs: tuple[int, ...], *, voters=(1, 2, 3), state_epoch=None) -> Harness:
    """Node 1, elected leader over a log of one-record entries of these epochs."""
    epoch = state_epoch if state_epoch is not None else (log_epochs[-1] if log_epochs else 0)
    harness = Harness(
        voters=voters, log=entries(*log_epochs), state=ElectionState(epoch=epoch, voters=voters)
    )
    harness.start()
    elect(harness)
    harness.flush()
    return harness


def test_the_leader_answers_a_fetch_with_its_entries_and_high_watermark():
    harness = leader_with((1, 1))
    epoch = harness.node.epoch  # 2; its control entry is at offset 2
    response = only_sent(
        harness.receive(2, fetch(epoch=epoch, offset=0, last_epoch=0)), FetchResponse
    )
    assert [e.base_offset for e in response.records] == [0, 1, 2]
    assert response.current_leader_id == 1 and response.current_leader_epoch == epoch
    assert response.high_watermark == 0 and response.diverging_epoch is None


def test_the_high_watermark_needs_a_majority_and_an_entry_of_the_leaders_own_epoch():
    harness = leader_with((1, 1))
    epoch = harness.node.epoch
    # Voter 2 has the old entries durable, not the new epoch's control entry at 2.
    actions = harness.receive(2, fetch(epoch=epoch, offset=2, last_epoch=1))
    assert not [a for a in actions if isinstance(a, CommitUpTo)]
    actions = harness.receive(2, fetch(epoch=epoch, offset=3, last_epoch=epoch))
    assert CommitUpTo(high_watermark=3) in actions
    assert harness.node.high_watermark == 3
    # Later entries wait for a second copy; a fetch from further back never lowers it.
    harness.step(ClientAppend(records=(b"x",)))
    harness.flush()
    assert harness.node.high_watermark == 3
    harness.receive(3, fetch(replica=3, epoch=epoch, offset=1, last_epoch=1))
    harness.receive(2, fetch(epoch=epoch, offset=2, last_epoch=1))
    assert harness.node.high_watermark == 3
    actions = harness.receive(3, fetch(replica=3, epoch=epoch, offset=4, last_epoch=epoch))
    assert CommitUpTo(high_watermark=4) in actions


def test_the_leader_counts_its_own_entries_only_once_flushed():
    harness = leader_with(())
    epoch = harness.node.epoch
    harness.receive(2, fetch(epoch=epoch, offset=1, last_epoch=epoch))
    assert harness.node.high_watermark == 1
    harness.step(ClientAppend(records=(b"x",)))
    harness.receive(2, fetch(epoch=epoch, offset=2, last_epoch=epoch))
    assert harness.node.high_watermark == 1  # only voter 2 has offset 1 durable
    assert CommitUpTo(high_watermark=2) in harness.flush()


def test_a_fetch_that_does_not_match_the_leaders_log_gets_the_diverging_epoch():
    harness = leader_with((1, 1, 3, 3), state_epoch=3)
    epoch = harness.node.epoch
    cases = [
        # (fetch offset, last fetched epoch) -> diverging (epoch, end offset)
        ((4, 2), OffsetAndEpoch(epoch=1, offset=2)),  # epoch 2 never reached the leader
        ((3, 1), OffsetAndEpoch(epoch=1, offset=2)),  # more epoch 1 entries than the leader's
        ((9, 3), OffsetAndEpoch(epoch=3, offset=4)),  # ahead of the leader in epoch 3
    ]
    for (offset, last_epoch), diverging in cases:
        response = only_sent(
            harness.receive(2, fetch(epoch=epoch, offset=offset, last_epoch=last_epoch)),
            FetchResponse,
        )
        assert response.diverging_epoch == diverging and response.records == ()
    assert harness.node.describe().voters[1].log_end_offset == -1  # nothing recorded


def follower_of(leader_id: int, epoch: int, log_epochs: tuple[int, ...], **kwargs) -> Harness:
    harness = Harness(
        log=entries(*log_epochs),
        state=ElectionState(epoch=epoch, leader_id=leader_id, voters=(1, 2, 3)),
        **kwargs,
    )
    harness.first_fetch = only_sent(harness.start(), FetchRequest)
    return harness


def answer(request: FetchRequest, **fields) -> FetchResponse:
    values = {"high_watermark": 0, "current_leader_id": 3, "current_leader_epoch": 5}
    values.update(fields)
    return FetchResponse(correlation_id=request.correlation_id, **values)


def test_a_follower_truncates_to_the_diverging_epoch_and_fetches_again():
    harness = follower_of(3, 5, (1, 1, 2, 2, 2))
    request = harness.first_fetch
    assert (request.fetch_offset, request.last_fetched_epoch) == (5, 2)
    actions = harness.receive(3, answer(request, diverging_epoch=OffsetAndEpoch(epoch=1, offset=2)))
    assert TruncateLog(offset=2) in actions
    again = only_sent(actions, FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (2, 1)
    assert harness.log.end_offset == 2


def test_a_follower_never_truncates_below_its_high_watermark():
    harness = follower_of(3, 5, (1, 1, 2))
    request = harness.first_fetch
    actions = harness.receive(3, answer(request, high_watermark=3))
    assert CommitUpTo(high_watermark=3) in actions
    request = only_sent(actions, FetchRequest)
    # The leader's answer cannot be right: it is refused, nothing is truncated, and the
    # follower fetches again after a backoff.
    actions = harness.receive(3, answer(request, diverging_epoch=OffsetAndEpoch(epoch=1, offset=2)))
    assert not [a for a in actions if isinstance(a, TruncateLog)]
    assert [a.kind for a in actions if isinstance(a, Refused)] == ["truncation"]
    assert harness.log.end_offset == 3 and harness.node.high_watermark == 3
    again = only_sent(harness.tick_to_deadline(), FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (3, 2)


def test_a_follower_appends_flushes_and_only_then_fetches_from_the_new_end():
    harness = follower_of(3, 5, (1,))
    new = (
        LogEntry(base_offset=1, epoch=5, records=(b"a",)),
        LogEntry(base_offset=2, epoch=5, records=(b"b", b"c")),
    )
    actions = harness.receive(3, answer(harness.first_fetch, records=new, high_watermark=9))
    assert [a.entry for a in actions if isinstance(a, AppendToLog)] == list(new)
    assert FlushLog() in actions
    # Its high watermark: what the leader said, but never past its own log end.
    assert CommitUpTo(high_watermark=4) in actions
    assert not sent(actions, FetchRequest)  # the new entries are not durable yet
    request = only_sent(harness.flush(), FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (4, 5)


def test_a_follower_learns_the_high_watermark_only_from_its_leader():
    harness = follower_of(3, 5, (1, 1))
    actions = harness.receive(3, answer(harness.first_fetch, high_watermark=1))
    assert CommitUpTo(high_watermark=1) in actions
    request = only_sent(actions, FetchRequest)
    # A stale answer (another correlation id) changes nothing.
    stale = FetchResponse(
        correlation_id=request.correlation_id + 100,
        high_watermark=2,
        current_leader_id=3,
        current_leader_epoch=5,
    )
    assert harness.receive(3, stale) == []
    assert harness.node.high_watermark == 1


@pytest.mark.parametrize(
    ("request_epoch", "error"),
    [
        (4, ErrorCode.fenced_leader_epoch),
        (9, ErrorCode.unknown_leader_epoch),
    ],
)
def test_a_fetch_in_another_epoch_is_refused(request_epoch, error):
    harness = leader_with((1, 1), state_epoch=4)  # leads epoch 5
    response = only_sent(
        harness.receive(2, fetch(epoch=request_epoch, offset=0, last_epoch=0)), FetchResponse
    )
    assert response.partition_error_code == error
    assert (response.current_leader_id, response.current_leader_epoch) == (1, 5)


def test_a_node_that_does_not_lead_names_the_leader_it_knows():
    harness = follower_of(3, 5, ())
    response = only_sent(harness.receive(2, fetch(epoch=5, offset=0, last_epoch=0)), FetchResponse)
    assert response.partition_error_code == ErrorCode.not_leader_or_follower
    assert (response.current_leader_id, response.current_leader_epoch) == (3, 5)
    other = only_sent(
        harness.receive(2, fetch(epoch=5, offset=0, last_epoch=0, cluster_id="elsewhere")),
        FetchResponse,
    )
    assert other.error_code == ErrorCode.inconsistent_cluster_id


def test_a_fenced_follower_learns_the_newer_epoch_from_the_answer():
    harness = follower_of(3, 5, ())
    actions = harness.receive(
        3,
        answer(
            harness.first_fetch,
            partition_error_code=ErrorCode.fenced_leader_epoch,
            current_leader_id=2,
            current_leader_epoch=7,
        ),
    )
    assert (harness.node.role, harness.node.leader_id, harness.node.epoch) == (Role.FOLLOWER, 2, 7)
    assert harness.store.read().epoch == 7
    request = only_sent(actions, FetchRequest)
    assert request.current_leader_epoch == 7 and sent(actions)[0].destination_id == 2


def test_a_fetch_with_nothing_new_waits_for_new_entries_or_its_max_wait():
    harness = leader_with(())
    epoch = harness.node.epoch
    harness.receive(2, fetch(epoch=epoch, offset=1, last_epoch=epoch, high_watermark=1))
    up_to_date = fetch(epoch=epoch, offset=1, last_epoch=epoch, high_watermark=1, max_wait_ms=500)
    assert harness.receive(2, up_to_date) == []  # held
    harness.step(ClientAppend(records=(b"x",)))
    answered = only_sent(harness.flush(), FetchResponse)
    assert [e.records for e in answered.records] == [(b"x",)]
    # Nothing new at all: answered empty when the wait is over.
    harness.receive(3, fetch(replica=3, epoch=epoch, offset=2, last_epoch=epoch, max_wait_ms=500))
    harness.receive(
        2, fetch(epoch=epoch, offset=2, last_epoch=epoch, high_watermark=2, max_wait_ms=500)
    )
    deadline = harness.node.next_deadline()
    assert deadline is not None and deadline == pytest.approx(harness.now + 0.5)
    actions = harness.step(Tick(), at=deadline)
    assert [s.destination_id for s in sent(actions, FetchResponse)] == [2]


def test_a_fetch_behind_on_the_high_watermark_is_answered_at_once():
    harness = leader_with(())
    epoch = harness.node.epoch
    harness.receive(3, fetch(replica=3, epoch=epoch, offset=1, last_epoch=epoch))
    assert harness.node.high_watermark == 1
    stale = fetch(epoch=epoch, offset=1, last_epoch=epoch, high_watermark=0, max_wait_ms=500)
    response = only_sent(harness.receive(2, stale), FetchResponse)
    assert response.high_watermark == 1 and response.records == ()


def test_fetch_answers_respect_the_byte_limit_but_carry_one_entry_at_least():
    harness = leader_with((1, 1, 1, 1))
    epoch = harness.node.epoch
    small = fetch(epoch=epoch, offset=0, last_epoch=0, max_bytes=1)
    assert len(only_sent(harness.receive(2, small), FetchResponse).records) == 1


def test_an_observer_asks_any_voter_then_follows_the_leader_it_names():
    harness = Harness(node_id=4, config=QuorumConfig(), seed=3)
    actions = harness.start()
    first = sent(actions, FetchRequest)
    assert len(first) == 1 and first[0].destination_id in (1, 2, 3)
    actions = harness.receive(
        first[0].destination_id,
        answer(
            first[0].message,
            partition_error_code=ErrorCode.not_leader_or_follower,
            current_leader_id=3,
            current_leader_epoch=5,
        ),
    )
    assert (harness.node.role, harness.node.leader_id) == (Role.FOLLOWER, 3)
    assert sent(actions, FetchRequest)[0].destination_id == 3


def test_describe_reports_voters_and_observers_as_the_leader_sees_them():
    harness = leader_with(())
    epoch = harness.node.epoch
    harness.receive(2, fetch(epoch=epoch, offset=1, last_epoch=epoch), at=5.0)
    harness.receive(7, fetch(replica=7, epoch=epoch, offset=0, last_epoch=0), at=6.0)
    description = harness.node.describe()
    assert (description.leader_id, description.epoch, description.high_watermark) == (1, 1, 1)
    voters = {v.replica_id: v for v in description.voters}
    assert voters[1].log_end_offset == 1
    assert (voters[2].log_end_offset, voters[2].last_fetch_time) == (1, 5.0)
    assert voters[2].last_caught_up_time == 5.0
    assert voters[3].log_end_offset == -1 and voters[3].last_fetch_time is None
    [observer] = description.observers
    assert (observer.replica_id, observer.log_end_offset, observer.last_fetch_time) == (7, 0, 6.0)
    assert observer.last_caught_up_time is None  # it was behind the leader's log end
