import pytest

from moldau.raft.events import ClientAppend, LeaderChanged, Resign, Tick
from moldau.raft.messages import EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest
from moldau.raft.node import NotLeaderError, Role
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from tests.unit.raft.harness import CLUSTER_ID, Harness, elect, entries, sent


def fetch_from(replica: int, epoch: int, offset: int) -> FetchRequest:
    return FetchRequest(
        correlation_id=offset,
        cluster_id=CLUSTER_ID,
        replica_id=replica,
        max_wait_ms=0,
        max_bytes=1 << 20,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=epoch if offset else 0,
        log_start_offset=0,
        partition_max_bytes=1 << 20,
    )


def leader(voters=(1, 2, 3)) -> Harness:
    harness = Harness(voters=voters)
    harness.start()
    elect(harness)
    harness.flush()
    return harness


def test_a_leader_without_fetches_from_a_majority_resigns_after_the_check_quorum_timeout():
    harness = leader()
    elected_at = harness.now
    epoch = harness.node.epoch
    harness.step(Tick(), at=elected_at + 2.9)
    assert harness.node.role is Role.LEADER
    actions = harness.step(Tick(), at=elected_at + 3.0)  # 1.5 x the 2 s fetch timeout
    assert harness.node.role is Role.RESIGNED and harness.node.epoch == epoch
    assert {s.destination_id for s in sent(actions, EndQuorumEpochRequest)} == {2, 3}
    with pytest.raises(NotLeaderError):
        harness.step(ClientAppend(records=(b"late",)))
    # After an election timeout it gives up the epoch and may stand again.
    while harness.node.role is Role.RESIGNED:
        harness.tick_to_deadline()
    assert harness.node.epoch == epoch + 1


def test_fetches_from_a_majority_keep_a_leader_in_place():
    harness = leader(voters=(1, 2, 3, 4, 5))
    epoch = harness.node.epoch
    start = harness.now
    for second in range(1, 20):
        for replica in (2, 3):  # with the leader, three of five
            harness.receive(replica, fetch_from(replica, epoch, 1), at=start + second)
    assert harness.node.role is Role.LEADER


def test_resign_names_the_other_voters_most_caught_up_first():
    harness = leader(voters=(1, 2, 3, 4))
    epoch = harness.node.epoch
    harness.step(ClientAppend(records=(b"a",)))
    harness.flush()
    harness.receive(4, fetch_from(4, epoch, 2))
    harness.receive(2, fetch_from(2, epoch, 1))
    actions = harness.step(Resign())
    assert harness.node.role is Role.RESIGNED
    requests = {s.destination_id: s.message for s in sent(actions, EndQuorumEpochRequest)}
    assert set(requests) == {2, 3, 4}
    assert requests[2].preferred_candidates == (4, 2, 3)
    assert requests[2].leader_id == 1 and requests[2].leader_epoch == epoch
    # Acknowledged voters are not asked again; a shutting-down node starts no election.
    harness.receive(
        4,
        EndQuorumEpochResponse(
            correlation_id=requests[4].correlation_id, leader_id=1, leader_epoch=epoch
        ),
    )
    later = harness.step(Tick(), at=harness.now + 2.0) + harness.step(Tick(), at=harness.now + 1)
    assert {s.destination_id for s in sent(later, EndQuorumEpochRequest)} == {2, 3}
    harness.step(Tick(), at=harness.now + 60)
    assert harness.node.role is Role.RESIGNED and harness.node.epoch == epoch


def test_a_restarted_leader_resumes_resigned_and_never_votes_again_in_its_epoch():
    state = ElectionState(epoch=4, leader_id=1, voted_id=1, voters=(1, 2, 3))
    harness = Harness(log=entries(1, 4), state=state)
    actions = harness.start()
    assert harness.node.role is Role.RESIGNED and harness.node.epoch == 4
    assert not [a for a in actions if isinstance(a, LeaderChanged)]
    with pytest.raises(NotLeaderError):
        harness.step(ClientAppend(records=(b"x",)))
    while harness.node.role is Role.RESIGNED:
        harness.tick_to_deadline()
    assert harness.node.epoch == 5 and harness.store.read().leader_id is None


def test_a_restart_follows_the_leader_it_knew():
    state = ElectionState(epoch=4, leader_id=3, voted_id=2, voters=(1, 2, 3))
    harness = Harness(log=entries(1, 4), state=state)
    actions = harness.start()
    assert (harness.node.role, harness.node.leader_id, harness.node.voted_id) == (
        Role.FOLLOWER,
        3,
        2,
    )
    assert LeaderChanged(leader_id=3, epoch=4) in actions
    assert sent(actions, FetchRequest)[0].destination_id == 3


def test_a_restart_with_an_older_quorum_state_than_the_log_moves_to_the_logs_epoch():
    harness = Harness(log=entries(1, 6), state=ElectionState(epoch=3, voters=(1, 2, 3)))
    harness.start()
    assert harness.node.role is Role.UNATTACHED and harness.node.epoch == 6
    assert harness.store.read().epoch == 6


def test_a_quorum_state_of_other_voters_is_refused():
    harness = Harness(state=ElectionState(epoch=3, voters=(1, 2, 4)))
    with pytest.raises(ValueError, match=r"controller\.quorum\.voters"):
        harness.start()


def test_the_quorum_config_reads_kafkas_property_names_and_keeps_its_defaults():
    config = QuorumConfig.from_properties(
        {"controller.quorum.election.timeout.ms": "1500", "controller.quorum.voters": "1@h:1"}
    )
    assert config.election_timeout_ms == 1500
    assert (config.fetch_timeout_ms, config.election_backoff_max_ms) == (2000, 1000)
    assert (config.request_timeout_ms, config.retry_backoff_ms) == (2000, 20)
    assert config.check_quorum_timeout_ms == 3000
