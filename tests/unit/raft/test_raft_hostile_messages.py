"""Quorum messages that lie or contradict the node's state: each is checked before it touches
the state and answered with an error (Kafka's KafkaRaftClient checks), never turned into a
failure of the node."""

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft.control_records import bootstrap_checkpoint
from moldau.raft.events import Refused, Send
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteResponse,
)
from moldau.raft.node import LAST_EPOCH, Resign, Role
from moldau.raft.quorum_state import ElectionState
from moldau.raft.snapshots import MemorySnapshotStore
from moldau.raft.voter_set import VoterNode, VoterSet
from tests.unit.raft.harness import (
    CLUSTER_ID,
    Harness,
    elect,
    entries,
    fetch,
    only_sent,
    sent,
    vote_request,
)


def begin_epoch(
    *,
    leader: int,
    epoch: int,
    receiver: int = 1,
    cluster_id: str | None = CLUSTER_ID,
    directory_id: str | None = None,
) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(
        correlation_id=5,
        cluster_id=cluster_id,
        voter_id=receiver,
        leader_id=leader,
        leader_epoch=epoch,
        voter_directory_id=directory_id,
    )


def end_epoch(*, leader: int, epoch: int, cluster_id: str | None = CLUSTER_ID):
    return EndQuorumEpochRequest(
        correlation_id=6,
        cluster_id=cluster_id,
        leader_id=leader,
        leader_epoch=epoch,
        preferred_candidates=(1,),
    )


def fetch_snapshot(*, replica: int = 2, epoch: int, cluster_id: str | None = CLUSTER_ID):
    return FetchSnapshotRequest(
        correlation_id=12,
        cluster_id=cluster_id,
        replica_id=replica,
        max_bytes=1024,
        current_leader_epoch=epoch,
        snapshot_id=OffsetAndEpoch(epoch=1, offset=1),
        position=0,
    )


def leader(**kwargs) -> Harness:
    """Node 1, leader of epoch 1 of voters 1-3, its leader-change entry flushed."""
    harness = Harness(**kwargs)
    harness.start()
    elect(harness)
    harness.flush()
    assert harness.node.role is Role.LEADER and harness.node.epoch == 1
    return harness


def answer_to(harness: Harness, source_id: int, request: RaftMessage) -> tuple[RaftMessage, list]:
    actions = harness.receive(source_id, request)
    replies = [
        a.message
        for a in actions
        if isinstance(a, Send)
        and a.destination_id == source_id
        and type(a.message).__name__.endswith("Response")
    ]
    assert len(replies) == 1, actions
    return replies[0], [a for a in actions if isinstance(a, Refused)]


def state_of(harness: Harness) -> tuple:
    node = harness.node
    return node.role, node.epoch, node.leader_id, node.voted_id, node.high_watermark


def test_another_voter_named_leader_of_the_leaders_epoch_is_refused_and_it_leads_on():
    # The probe's packet: BeginQuorumEpoch v0 (null cluster id) naming voter 2 leader of the
    # epoch that node 1 leads, sent to node 1.
    harness = leader()
    before = state_of(harness)
    response, refused = answer_to(
        harness, 2, begin_epoch(leader=2, epoch=1, receiver=-1, cluster_id=None)
    )
    assert isinstance(response, BeginQuorumEpochResponse)
    assert (response.error_code, response.partition_error_code) == (0, ErrorCode.invalid_request)
    assert (response.leader_id, response.leader_epoch) == (1, 1)
    assert [r.kind for r in refused] == ["leader"]
    assert "node 2 named as leader of epoch 1, which this node leads" in refused[0].reason
    assert state_of(harness) == before
    # Still the leader, still answering: a follower's fetch is served and moves the high
    # watermark.
    served, _ = answer_to(harness, 2, fetch(epoch=1, offset=1, last_epoch=1))
    assert isinstance(served, FetchResponse) and served.partition_error_code == 0
    assert harness.node.high_watermark == 1


def test_an_end_of_the_leaders_epoch_by_another_voter_is_refused():
    harness = leader()
    before = state_of(harness)
    response, refused = answer_to(harness, 3, end_epoch(leader=3, epoch=1))
    assert isinstance(response, EndQuorumEpochResponse)
    assert response.partition_error_code == ErrorCode.invalid_request
    assert [r.kind for r in refused] == ["leader"] and state_of(harness) == before


def test_a_resigned_leader_refuses_another_leader_of_its_epoch():
    harness = leader()
    harness.step(Resign())
    assert harness.node.role is Role.RESIGNED
    response, refused = answer_to(harness, 2, begin_epoch(leader=2, epoch=1))
    assert response.partition_error_code == ErrorCode.invalid_request
    assert [r.kind for r in refused] == ["leader"]
    assert harness.node.role is Role.RESIGNED and harness.node.leader_id == 1


def follower_of_3(*, heard: bool) -> tuple[Harness, FetchRequest]:
    harness = Harness(state=ElectionState(epoch=4, leader_id=3, voters=(1, 2, 3)))
    request = only_sent(harness.start(), FetchRequest)
    if heard:
        harness.receive(
            3,
            FetchResponse(
                correlation_id=request.correlation_id,
                high_watermark=0,
                current_leader_id=3,
                current_leader_epoch=4,
            ),
        )
    return harness, request


def test_a_follower_that_heard_from_its_leader_refuses_another_leader_of_the_epoch():
    harness, _ = follower_of_3(heard=True)
    response, refused = answer_to(harness, 2, begin_epoch(leader=2, epoch=4))
    assert response.partition_error_code == ErrorCode.invalid_request
    assert [r.kind for r in refused] == ["leader"]
    assert (harness.node.role, harness.node.leader_id, harness.node.epoch) == (Role.FOLLOWER, 3, 4)


def test_a_leader_never_heard_from_gives_way_to_the_one_that_says_it_leads():
    # A follower that restarted names its old leader until that one answers: a claim by the
    # node that says it leads is believed (the one named may have been a lie).
    harness, _ = follower_of_3(heard=False)
    response, refused = answer_to(harness, 2, begin_epoch(leader=2, epoch=4))
    assert response.partition_error_code == 0 and not refused
    assert (harness.node.leader_id, harness.node.epoch) == (2, 4)


def test_what_another_node_says_of_the_leader_is_not_believed():
    # Followers misled to name each other would otherwise follow one another in a circle,
    # never standing for election (a seed of the forged-message simulation).
    harness, request = follower_of_3(heard=False)
    harness.receive(
        3,
        FetchResponse(
            correlation_id=request.correlation_id,
            partition_error_code=ErrorCode.not_leader_or_follower,
            current_leader_id=2,
            current_leader_epoch=4,
        ),
    )
    assert (harness.node.leader_id, harness.node.epoch) == (3, 4)


@pytest.mark.parametrize("cluster_id", ["another-cluster", ""])
def test_another_cluster_id_is_refused_by_every_rpc(cluster_id):
    harness = leader()
    before = state_of(harness)
    for source_id, request in [
        (2, vote_request(epoch=9, last_epoch=1, last_offset=9, cluster_id=cluster_id)),
        (2, begin_epoch(leader=2, epoch=9, cluster_id=cluster_id)),
        (2, end_epoch(leader=2, epoch=1, cluster_id=cluster_id)),
        (2, fetch(epoch=1, offset=1, last_epoch=1, cluster_id=cluster_id)),
        (2, fetch_snapshot(epoch=1, cluster_id=cluster_id)),
    ]:
        response, refused = answer_to(harness, source_id, request)
        assert response.error_code == ErrorCode.inconsistent_cluster_id, request
        assert [r.kind for r in refused] == ["cluster-id"]
    assert state_of(harness) == before


def test_a_request_without_a_cluster_id_is_taken_as_kafka_takes_it():
    # Fetch before v12 cannot carry one; Kafka's hasValidClusterId accepts a null one.
    harness = leader()
    response, refused = answer_to(
        harness, 2, fetch(epoch=1, offset=1, last_epoch=1, cluster_id=None)
    )
    assert (response.error_code, response.partition_error_code) == (0, 0) and not refused
    assert harness.node.high_watermark == 1


def test_a_voter_key_for_another_node_or_directory_is_invalid():
    harness = Harness(directory_id="dir-1")
    harness.start()
    for request in [
        vote_request(epoch=1, receiver=3),
        begin_epoch(leader=2, epoch=1, receiver=3),
        vote_request(epoch=1, receiver=1, directory_id="dir-other"),
        begin_epoch(leader=2, epoch=1, directory_id="dir-of-a-lost-disk"),
    ]:
        response, refused = answer_to(harness, 2, request)
        assert response.partition_error_code == ErrorCode.invalid_voter_key, request
        assert [r.kind for r in refused] == ["voter-key"]
    # Nothing was learned: no epoch, no vote, no leader.
    assert state_of(harness) == (Role.UNATTACHED, 0, None, None, 0)
    # The version without voter keys (v0: voter id -1) is taken.
    response, _ = answer_to(harness, 2, begin_epoch(leader=2, epoch=1, receiver=-1))
    assert response.partition_error_code == 0 and harness.node.leader_id == 2


def test_a_message_in_this_nodes_own_name_is_refused():
    harness = leader()
    before = state_of(harness)
    for request in [
        vote_request(candidate=1, epoch=5, last_epoch=1, last_offset=9),
        begin_epoch(leader=1, epoch=5),
        end_epoch(leader=1, epoch=1),
        fetch(replica=1, epoch=1, offset=1, last_epoch=1),
        fetch_snapshot(replica=1, epoch=1),
    ]:
        response, refused = answer_to(harness, 1, request)
        assert response.partition_error_code == ErrorCode.invalid_request, request
        assert [r.kind for r in refused] == ["sender"], request
    assert state_of(harness) == before


def test_an_epoch_no_election_could_follow_is_refused():
    harness = Harness()
    harness.start()
    for request in [
        vote_request(epoch=LAST_EPOCH, last_epoch=1, last_offset=1),
        begin_epoch(leader=2, epoch=LAST_EPOCH),
        end_epoch(leader=2, epoch=LAST_EPOCH),
    ]:
        response, refused = answer_to(harness, 2, request)
        assert response.partition_error_code == ErrorCode.invalid_request, request
        assert [r.kind for r in refused] == ["epoch"]
    assert harness.node.epoch == 0 and harness.node.role is Role.UNATTACHED
    # An answer naming it is dropped the same way.
    harness = Harness()
    harness.start()
    request = sent(elect(harness), BeginQuorumEpochRequest)[0].message
    actions = harness.receive(
        request.voter_id,
        BeginQuorumEpochResponse(
            correlation_id=request.correlation_id, leader_id=None, leader_epoch=LAST_EPOCH
        ),
    )
    assert [a.kind for a in actions if isinstance(a, Refused)] == ["epoch"]
    assert harness.node.role is Role.LEADER and harness.node.epoch == 1


def test_epochs_are_checked_as_kafka_checks_them():
    harness = leader()
    stale, _ = answer_to(harness, 2, begin_epoch(leader=2, epoch=0))
    assert stale.partition_error_code == ErrorCode.fenced_leader_epoch
    newer, _ = answer_to(harness, 2, fetch(epoch=2, offset=1, last_epoch=1))
    assert newer.partition_error_code == ErrorCode.unknown_leader_epoch
    older, _ = answer_to(harness, 2, fetch_snapshot(epoch=0))
    assert isinstance(older, FetchSnapshotResponse)
    assert older.partition_error_code == ErrorCode.fenced_leader_epoch
    invalid, _ = answer_to(harness, 2, fetch(epoch=1, offset=1, last_epoch=2))
    assert invalid.partition_error_code == ErrorCode.invalid_request
    assert harness.node.role is Role.LEADER and harness.node.high_watermark == 0


def test_an_absurd_fetch_offset_is_answered_with_the_diverging_epoch_and_counts_for_nothing():
    harness = leader()
    response, _ = answer_to(harness, 2, fetch(epoch=1, offset=2**62, last_epoch=1))
    assert response.diverging_epoch == OffsetAndEpoch(epoch=1, offset=1)
    assert harness.node.high_watermark == 0


def test_a_vote_given_is_given_again_only_to_a_log_as_up_to_date():
    # A vote asked for in voter 2's name with a log it does not have must not stand for the
    # real voter 2, whose log is behind this node's.
    harness = Harness(log=entries(1, 1), state=ElectionState(epoch=1, voters=(1, 2, 3)))
    harness.start()
    forged, _ = answer_to(harness, 2, vote_request(epoch=2, last_epoch=1, last_offset=99))
    assert isinstance(forged, VoteResponse) and forged.vote_granted
    real, _ = answer_to(harness, 2, vote_request(epoch=2, last_epoch=1, last_offset=1))
    assert not real.vote_granted
    again, _ = answer_to(harness, 2, vote_request(epoch=2, last_epoch=1, last_offset=99))
    assert again.vote_granted  # the same request again (a lost answer)


def test_a_fetch_with_another_directory_than_the_voters_does_not_count_for_it():
    nodes = [VoterNode(node_id=i, directory_id=f"dir-{i}") for i in (1, 2, 3)]
    snapshots = MemorySnapshotStore()
    snapshots.create(
        OffsetAndEpoch(epoch=0, offset=0), bootstrap_checkpoint(VoterSet.of_nodes(nodes))
    )
    harness = leader(voters=(), directory_id="dir-1", snapshots=snapshots)
    end = harness.node.log_end_offset
    # Voter 2's id with the directory of a replaced disk: served as an observer's fetch,
    # counted neither towards the high watermark nor as voter 2's progress.
    response, _ = answer_to(
        harness, 2, fetch(epoch=1, offset=end, last_epoch=1, directory_id="dir-new")
    )
    assert response.partition_error_code == 0
    assert harness.node.high_watermark == 0
    assert harness.node.describe().voters[1].log_end_offset == -1
    answer_to(harness, 2, fetch(epoch=1, offset=end, last_epoch=1, directory_id="dir-2"))
    assert harness.node.high_watermark == end


def test_a_held_fetch_replaced_by_another_in_the_same_name_is_answered_not_dropped():
    harness = leader()
    caught_up = fetch(epoch=1, offset=1, last_epoch=1)
    harness.receive(2, caught_up)
    assert harness.node.high_watermark == 1
    waiting = fetch(epoch=1, offset=1, last_epoch=1, max_wait_ms=500, high_watermark=1)
    assert not harness.receive(2, waiting)  # nothing new: held
    actions = harness.receive(2, fetch(epoch=1, offset=2**40, last_epoch=1))  # forged
    answers = [a.message for a in actions if isinstance(a, Send)]
    assert [type(m) for m in answers] == [FetchResponse, FetchResponse]
    assert (
        answers[0].correlation_id == waiting.correlation_id and answers[0].diverging_epoch is None
    )
    assert answers[1].diverging_epoch == OffsetAndEpoch(epoch=1, offset=1)


def test_an_end_of_epoch_in_the_leaders_name_does_not_unlock_another_claim():
    # (the quorum fuzzer's find: an EndQuorumEpoch in leader 3's name, then a stranger named
    # leader of the epoch, and the follower followed a node that does not exist)
    harness, _ = follower_of_3(heard=True)
    response, _ = answer_to(harness, 3, end_epoch(leader=3, epoch=4))
    assert response.partition_error_code == 0
    response, refused = answer_to(harness, 99, begin_epoch(leader=99, epoch=4))
    assert response.partition_error_code == ErrorCode.invalid_request
    assert [r.kind for r in refused] == ["leader"]
    assert (harness.node.leader_id, harness.node.epoch) == (3, 4)


def test_the_leader_saying_it_leads_corrects_one_never_heard_from():
    harness, _ = follower_of_3(heard=False)
    answer_to(harness, 99, begin_epoch(leader=99, epoch=4))  # believed: 3 never answered
    assert harness.node.leader_id == 99
    actions = harness.tick_to_deadline()  # 99 never answers: the follower stands
    assert harness.node.role is Role.PROSPECTIVE
    requests = {a.destination_id: a.message for a in actions if isinstance(a, Send)}
    # Voter 2 naming 3 is not enough (it may have been lied to as well); 3 naming itself is.
    for voter in (2, 3):
        harness.receive(
            voter,
            VoteResponse(
                correlation_id=requests[voter].correlation_id,
                leader_id=3,
                leader_epoch=4,
                vote_granted=False,
            ),
        )
        if voter == 2:
            assert harness.node.role is Role.PROSPECTIVE
    assert (harness.node.role, harness.node.leader_id, harness.node.epoch) == (
        Role.FOLLOWER,
        3,
        4,
    )
