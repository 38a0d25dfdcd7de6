from moldau.protocol.errors import ErrorCode
from moldau.raft.events import LeaderChanged, PersistElectionState, Send, Tick
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.node import Role
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from tests.unit.raft.harness import (
    CLUSTER_ID,
    Harness,
    elect,
    entries,
    only_sent,
    sent,
    vote_request,
)


def started(**kwargs) -> Harness:
    harness = Harness(**kwargs)
    harness.start()
    return harness


def test_a_granted_vote_is_persisted_before_the_response_leaves():
    harness = started()
    actions = harness.receive(2, vote_request(epoch=1))
    assert [type(a) for a in actions] == [PersistElectionState, PersistElectionState, Send]
    assert actions[1].state == ElectionState(epoch=1, leader_id=None, voted_id=2, voters=(1, 2, 3))
    response = actions[2].message
    assert response == VoteResponse(
        correlation_id=7, leader_id=None, leader_epoch=1, vote_granted=True
    )
    assert harness.node.epoch == 1 and harness.node.voted_id == 2


def test_one_vote_per_epoch_even_across_a_restart():
    harness = started()
    harness.receive(2, vote_request(candidate=2, epoch=1))
    refused = only_sent(harness.receive(3, vote_request(candidate=3, epoch=1)), VoteResponse)
    assert not refused.vote_granted
    again = only_sent(harness.receive(2, vote_request(candidate=2, epoch=1)), VoteResponse)
    assert again.vote_granted  # the same candidate asking again (a lost response)
    restarted = Harness(state=harness.store.read())
    restarted.start()
    assert restarted.node.voted_id == 2
    refused = only_sent(restarted.receive(3, vote_request(candidate=3, epoch=1)), VoteResponse)
    assert not refused.vote_granted
    granted = only_sent(restarted.receive(3, vote_request(candidate=3, epoch=2)), VoteResponse)
    assert granted.vote_granted


def test_a_vote_goes_only_to_a_log_at_least_as_up_to_date():
    log = entries(1, 1, 2)  # last epoch 2, end offset 3
    for last_epoch, last_offset, granted in [
        (2, 3, True),
        (2, 4, True),
        (3, 1, True),  # a later last epoch wins over a shorter log
        (2, 2, False),
        (1, 9, False),
    ]:
        harness = started(log=log, state=ElectionState(epoch=2, voters=(1, 2, 3)))
        request = vote_request(epoch=4, last_epoch=last_epoch, last_offset=last_offset)
        response = only_sent(harness.receive(2, request), VoteResponse)
        assert response.vote_granted is granted, (last_epoch, last_offset)
        assert harness.node.epoch == 4  # a candidate's epoch is learned either way


def test_a_vote_whose_last_epoch_is_not_below_the_candidates_epoch_is_invalid():
    harness = started()
    response = only_sent(harness.receive(2, vote_request(epoch=3, last_epoch=3)), VoteResponse)
    assert response.partition_error_code == ErrorCode.invalid_request
    pre_vote = vote_request(epoch=3, last_epoch=3, pre_vote=True)  # a prospective's may equal it
    assert only_sent(harness.receive(2, pre_vote), VoteResponse).partition_error_code == 0


def test_a_pre_vote_persists_nothing_and_bumps_no_epoch():
    harness = started(state=ElectionState(epoch=4, voters=(1, 2, 3)))
    writes = harness.store.writes
    actions = harness.receive(2, vote_request(epoch=5, last_epoch=4, pre_vote=True))
    assert [type(a) for a in actions] == [Send]
    assert actions[0].message.vote_granted
    assert harness.node.epoch == 4 and harness.node.voted_id is None
    assert harness.store.writes == writes


def test_a_follower_that_hears_from_its_leader_refuses_pre_votes():
    harness = Harness(state=ElectionState(epoch=3, leader_id=3, voters=(1, 2, 3)))
    fetch = only_sent(harness.start(), FetchRequest)
    assert harness.node.role is Role.FOLLOWER
    # Until the leader answers, the follower may suspect it.
    pre_vote = vote_request(epoch=3, pre_vote=True)
    assert only_sent(harness.receive(2, pre_vote), VoteResponse).vote_granted
    harness.receive(
        3,
        FetchResponse(
            correlation_id=fetch.correlation_id,
            high_watermark=0,
            current_leader_id=3,
            current_leader_epoch=3,
        ),
    )
    assert not only_sent(harness.receive(2, pre_vote), VoteResponse).vote_granted
    assert harness.node.epoch == 3 and harness.node.role is Role.FOLLOWER


def test_a_request_from_an_older_epoch_is_fenced():
    harness = started(state=ElectionState(epoch=5, voters=(1, 2, 3)))
    response = only_sent(harness.receive(2, vote_request(epoch=4)), VoteResponse)
    assert response.partition_error_code == ErrorCode.fenced_leader_epoch
    assert response.leader_epoch == 5 and not response.vote_granted
    begin = BeginQuorumEpochRequest(
        correlation_id=1, cluster_id=CLUSTER_ID, voter_id=1, leader_id=2, leader_epoch=4
    )
    answer = only_sent(harness.receive(2, begin), BeginQuorumEpochResponse)
    assert answer.partition_error_code == ErrorCode.fenced_leader_epoch
    assert harness.node.role is Role.UNATTACHED and harness.node.epoch == 5


def test_another_cluster_and_a_request_for_another_node_are_refused():
    harness = started()
    other_cluster = only_sent(harness.receive(2, vote_request(cluster_id="other")), VoteResponse)
    assert other_cluster.error_code == ErrorCode.inconsistent_cluster_id
    wrong_receiver = only_sent(harness.receive(2, vote_request(receiver=3)), VoteResponse)
    assert wrong_receiver.partition_error_code == ErrorCode.invalid_voter_key
    assert harness.node.voted_id is None and harness.node.epoch == 0


def test_a_candidate_outside_the_static_voters_is_answered():
    """The receiver's voter set may lag the candidate's (a voter added after the kraft.version
    upgrade, in entries it has not fetched yet): it answers on the logs, as Kafka since
    KIP-853; the candidate counts only the votes of its own voter set."""
    harness = started()
    response = only_sent(harness.receive(9, vote_request(candidate=9)), VoteResponse)
    assert response.partition_error_code == 0 and response.vote_granted
    assert harness.node.voted_id == 9 and harness.node.epoch == 1


def test_a_node_outside_its_static_voters_votes_but_never_stands():
    """Node 4's log (kraft.version 0) names the static voters 1, 2, 3; the quorum may have been
    upgraded and have added 4 in entries 4 has not fetched, and a leader may need its vote to
    be elected at all. It votes, on the logs, and keeps its vote across a restart; it does
    not stand while its own log does not name it."""
    harness = started(node_id=4)
    pre_vote = vote_request(receiver=4, epoch=0, pre_vote=True)
    assert only_sent(harness.receive(2, pre_vote), VoteResponse).vote_granted
    response = only_sent(harness.receive(2, vote_request(receiver=4)), VoteResponse)
    assert response.partition_error_code == 0 and response.vote_granted
    assert harness.store.read() == ElectionState(
        epoch=1, leader_id=None, voted_id=2, voters=(1, 2, 3)
    )
    restarted = Harness(node_id=4, state=harness.store.read())
    restarted.start()
    assert restarted.node.voted_id == 2 and restarted.node.epoch == 1
    refused = only_sent(restarted.receive(3, vote_request(candidate=3, receiver=4)), VoteResponse)
    assert not refused.vote_granted  # one vote per epoch, as any voter
    for _ in range(5):
        assert not sent(restarted.step(Tick(), at=restarted.now + 5.0), VoteRequest)
    assert restarted.node.role is Role.UNATTACHED


def test_the_election_timeout_is_the_configured_one_plus_a_jitter_below_it():
    timeouts = set()
    for seed in range(40):
        harness = started(seed=seed, config=QuorumConfig(election_timeout_ms=1000))
        deadline = harness.node.next_deadline()
        assert deadline is not None and 1.0 <= deadline < 2.0
        timeouts.add(deadline)
    assert len(timeouts) > 30


def test_an_election_runs_pre_votes_then_votes_then_leads():
    harness = started(log=entries(1, 1), state=ElectionState(epoch=1, voters=(1, 2, 3)))
    actions = harness.tick_to_deadline()
    assert harness.node.role is Role.PROSPECTIVE and harness.node.epoch == 1
    pre_votes = [s.message for s in sent(actions, VoteRequest)]
    assert [(v.voter_id, v.pre_vote, v.replica_epoch) for v in pre_votes] == [
        (2, True, 1),
        (3, True, 1),
    ]
    assert pre_votes[0].last_offset_epoch == 1 and pre_votes[0].last_offset == 2
    granted = VoteResponse(
        correlation_id=pre_votes[0].correlation_id,
        leader_id=None,
        leader_epoch=1,
        vote_granted=True,
    )
    actions = harness.receive(2, granted)
    assert harness.node.role is Role.CANDIDATE and harness.node.epoch == 2
    assert isinstance(actions[0], PersistElectionState)
    assert actions[0].state.voted_id == 1 and actions[0].state.epoch == 2
    votes = [s.message for s in sent(actions, VoteRequest)]
    assert [(v.voter_id, v.pre_vote, v.replica_epoch) for v in votes] == [
        (2, False, 2),
        (3, False, 2),
    ]
    actions = harness.receive(
        3,
        VoteResponse(
            correlation_id=votes[1].correlation_id,
            leader_id=None,
            leader_epoch=2,
            vote_granted=True,
        ),
    )
    assert harness.node.role is Role.LEADER
    assert LeaderChanged(leader_id=1, epoch=2) in actions
    control = harness.log.read(2).__next__()
    assert control.is_control and control.epoch == 2
    begins = [s.message for s in sent(actions, BeginQuorumEpochRequest)]
    assert [(b.voter_id, b.leader_epoch) for b in begins] == [(2, 2), (3, 2)]


def test_a_lost_pre_vote_returns_to_the_known_leader_without_a_new_epoch():
    harness = started(state=ElectionState(epoch=3, leader_id=2, voters=(1, 2, 3)))
    actions = harness.tick_to_deadline()  # no fetch answered within the fetch timeout
    assert harness.node.role is Role.PROSPECTIVE
    pre_votes = [s.message for s in sent(actions, VoteRequest)]
    for voter_id, request in zip((2, 3), pre_votes, strict=True):
        harness.receive(
            voter_id,
            VoteResponse(
                correlation_id=request.correlation_id,
                leader_id=2,
                leader_epoch=3,
                vote_granted=False,
            ),
        )
    assert harness.node.role is Role.FOLLOWER and harness.node.leader_id == 2
    assert harness.node.epoch == 3


def test_a_lost_election_backs_off_then_stands_again_with_pre_votes():
    harness = started(config=QuorumConfig(election_backoff_max_ms=1000))
    actions = harness.tick_to_deadline()
    for request in (s.message for s in sent(actions, VoteRequest)):
        actions = harness.receive(
            request.voter_id,
            VoteResponse(
                correlation_id=request.correlation_id,
                leader_id=None,
                leader_epoch=0,
                vote_granted=True,
            ),
        )
        if harness.node.role is Role.CANDIDATE:
            break
    votes = [s.message for s in sent(actions, VoteRequest)]
    for request in votes:
        harness.receive(
            request.voter_id,
            VoteResponse(
                correlation_id=request.correlation_id,
                leader_id=None,
                leader_epoch=1,
                vote_granted=False,
            ),
        )
    assert harness.node.role is Role.CANDIDATE
    lost_at = harness.now
    deadline = harness.node.next_deadline()
    assert deadline is not None and deadline - lost_at <= 1.0  # the backoff, not a timeout
    actions = harness.tick_to_deadline()
    assert harness.node.role is Role.PROSPECTIVE and harness.node.epoch == 1
    assert all(s.message.pre_vote for s in sent(actions, VoteRequest))


def test_begin_quorum_epoch_makes_a_follower_and_is_resent_until_acknowledged():
    harness = started()
    begin = BeginQuorumEpochRequest(
        correlation_id=4, cluster_id=CLUSTER_ID, voter_id=1, leader_id=3, leader_epoch=2
    )
    actions = harness.receive(3, begin)
    assert harness.node.role is Role.FOLLOWER and harness.node.leader_id == 3
    assert LeaderChanged(leader_id=3, epoch=2) in actions
    response = only_sent(actions, BeginQuorumEpochResponse)
    assert response.leader_id == 3 and response.leader_epoch == 2
    # The follower starts fetching at once.
    fetch = only_sent(actions, FetchRequest)
    assert fetch.current_leader_epoch == 2 and fetch.fetch_offset == 0


def test_a_leader_resends_begin_quorum_epoch_until_each_voter_answers_or_fetches():
    harness = started()
    actions = elect(harness)
    epoch = harness.node.epoch
    begins = {s.destination_id: s.message for s in sent(actions, BeginQuorumEpochRequest)}
    assert set(begins) == {2, 3}
    harness.receive(
        2,
        BeginQuorumEpochResponse(
            correlation_id=begins[2].correlation_id, leader_id=1, leader_epoch=epoch
        ),
    )
    # Voter 3's request went unanswered: sent again after the request timeout and a backoff.
    timed_out = harness.step(Tick(), at=harness.now + 2.0)
    actions = timed_out + harness.step(Tick(), at=harness.now + 0.05)
    assert [s.destination_id for s in sent(actions, BeginQuorumEpochRequest)] == [3]
    harness.receive(
        3,
        FetchRequest(
            correlation_id=1,
            cluster_id=CLUSTER_ID,
            replica_id=3,
            max_wait_ms=0,
            max_bytes=1000,
            current_leader_epoch=epoch,
            fetch_offset=0,
            last_fetched_epoch=0,
            log_start_offset=0,
            partition_max_bytes=1000,
        ),
    )
    later = harness.step(Tick(), at=harness.now + 2.0) + harness.step(Tick(), at=harness.now + 0.1)
    assert not sent(later, BeginQuorumEpochRequest)
    assert harness.node.role is Role.LEADER


def test_end_quorum_epoch_makes_followers_stand_in_the_order_of_the_leaders_list():
    delays = {}
    for node_id in (1, 2, 3, 4):
        harness = started(
            node_id=node_id,
            voters=(1, 2, 3, 4, 5),
            state=ElectionState(epoch=3, leader_id=5, voters=(1, 2, 3, 4, 5)),
            config=QuorumConfig(election_backoff_max_ms=1000),
        )
        end = EndQuorumEpochRequest(
            correlation_id=1,
            cluster_id=CLUSTER_ID,
            leader_id=5,
            leader_epoch=3,
            preferred_candidates=(3, 1, 4, 2),
        )
        harness.receive(5, end, at=1.0)
        if harness.node.role is Role.PROSPECTIVE:
            delays[node_id] = 0.0  # the first successor stood at once
        else:
            delays[node_id] = round(harness.node.next_deadline() - 1.0, 3)
    assert delays == {3: 0.0, 1: 0.125, 4: 0.25, 2: 0.5}
