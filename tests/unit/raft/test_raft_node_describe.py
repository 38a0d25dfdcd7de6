from moldau.raft.node import (
    ClientAppend,
    LogFlushed,
    QuorumDescription,
    RaftNode,
    Role,
    Start,
    VoterState,
)
from moldau.raft.voter_set import VoterNode


def test_describe_reports_leader_epoch_high_watermark_and_flushed_voter_offsets():
    node = RaftNode(node_id=3, voters=(3,))
    assert node.describe().voters == (VoterState(replica_id=3, log_end_offset=-1),)
    node.step(Start(election_state=None, log_end_offset=5, last_epoch=2), 0.0)
    node.step(ClientAppend(records=(b"a", b"b")), 0.0)
    node.step(LogFlushed(flushed_offset=8), 0.0)

    assert node.describe() == QuorumDescription(
        node_id=3,
        role=Role.LEADER,
        leader_id=3,
        epoch=3,
        high_watermark=8,
        voters=(
            VoterState(
                replica_id=3, log_end_offset=8, last_fetch_time=0.0, last_caught_up_time=0.0
            ),
        ),
        voter_nodes=(VoterNode(node_id=3),),
    )


def test_a_leader_of_static_voters_reports_its_own_directory_id():
    """Followers' directory ids come from their fetches; the leader's from its own directory
    (`moldau cluster info` showed `-` for the leader alone)."""
    node = RaftNode(node_id=3, voters=(3,), directory_id="leader-directory")
    node.step(Start(election_state=None, log_end_offset=0, last_epoch=0), 0.0)
    assert node.role is Role.LEADER
    assert [v.directory_id for v in node.describe().voters] == ["leader-directory"]
