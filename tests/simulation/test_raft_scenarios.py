"""Named fault scenarios, each on one seed, with the invariants checked after every step."""

from __future__ import annotations

import pytest

from moldau.raft.log import LogEntry
from moldau.raft.node import Role
from moldau.raft.quorum_state import ElectionState
from tests.simulation.cluster import DiskConditions, SimulatedCluster

THREE = (1, 2, 3)
FIVE = (1, 2, 3, 4, 5)


def elect(cluster: SimulatedCluster, *, within: float = 15.0) -> int:
    assert cluster.run_for(within, stop=lambda: cluster.leader_id() is not None), (
        f"no leader within {within}s\n{cluster.describe_state()}"
    )
    leader = cluster.leader_id()
    assert leader is not None
    return leader


def commit_everywhere(cluster: SimulatedCluster, count: int, *, within: float = 10.0) -> None:
    """Append `count` records through the leader; all must be applied on every live node."""
    leader = elect(cluster)
    last = None
    for _ in range(count):
        appended = cluster.client_append(leader)
        assert appended is not None
        last = appended[2]
        cluster.run_for(0.01)
    assert last is not None
    assert cluster.run_for(
        within, stop=lambda: all(n.applied_offset > last for n in cluster.live_nodes())
    ), f"entry {last} did not reach every node\n{cluster.describe_state()}"
    cluster.checker.assert_converged()


def raft(cluster: SimulatedCluster, node_id: int):
    node = cluster.nodes[node_id].raft
    assert node is not None
    return node


def test_a_quorum_elects_one_leader_and_an_observer_follows_without_voting():
    cluster = SimulatedCluster(seed=1, voters=THREE, observers=(4,))
    cluster.start_all()
    commit_everywhere(cluster, 20)
    assert raft(cluster, 4).role is Role.FOLLOWER
    assert cluster.sent[4, "VoteRequest"] == 0
    assert cluster.sent[4, "FetchRequest"] > 0
    leader = raft(cluster, cluster.leader_id())
    assert [o.replica_id for o in leader.describe().observers] == [4]


def test_an_isolated_leader_resigns_and_the_others_elect_a_new_one():
    cluster = SimulatedCluster(seed=2, voters=THREE)
    cluster.start_all()
    old = elect(cluster)
    old_epoch = raft(cluster, old).epoch
    cluster.isolate(old)
    # Check-quorum: no fetch from a majority within 1.5 x the fetch timeout (3 s).
    cluster.run_for(3.5)
    assert raft(cluster, old).role is Role.RESIGNED
    new = elect(cluster)
    assert new != old and raft(cluster, new).epoch > old_epoch
    commit_everywhere_but(cluster, old, 5)
    cluster.heal()
    commit_everywhere(cluster, 5)
    assert raft(cluster, old).role is Role.FOLLOWER


def commit_everywhere_but(cluster: SimulatedCluster, absent: int, count: int) -> None:
    """Like commit_everywhere, on every live node but those cut off from the leader with
    `absent`."""
    leader = elect(cluster)
    appended = None
    for _ in range(count):
        appended = cluster.client_append(leader)
        cluster.run_for(0.01)
    assert appended is not None
    present = [
        n
        for n in cluster.live_nodes()
        if n.node_id != absent and (leader, n.node_id) not in cluster.cut_links
    ]
    assert cluster.run_for(5.0, stop=lambda: all(n.applied_offset > appended[2] for n in present))


def test_a_voter_cut_off_from_the_leader_does_not_disturb_it():
    cluster = SimulatedCluster(seed=3, voters=THREE)
    cluster.start_all()
    commit_everywhere(cluster, 3)  # and nothing more: its log stays as up to date as theirs
    leader = elect(cluster)
    epoch = raft(cluster, leader).epoch
    cut_off, other = (n for n in THREE if n != leader)
    # It still reaches the other follower, which hears from the leader and so refuses its
    # pre-votes: it never becomes a candidate, and no epoch is bumped.
    cluster.cut(cut_off, leader)
    cluster.cut(leader, cut_off)
    cluster.run_for(20.0)
    assert cluster.sent[cut_off, "VoteRequest"] > 0
    assert all(raft(cluster, n).epoch == epoch for n in THREE)
    assert raft(cluster, other).role is Role.FOLLOWER
    cluster.heal()
    commit_everywhere(cluster, 3)
    assert cluster.leader_id() == leader and raft(cluster, leader).epoch == epoch
    assert raft(cluster, cut_off).role is Role.FOLLOWER


def test_a_leader_that_cannot_hear_its_followers_is_replaced():
    cluster = SimulatedCluster(seed=4, voters=THREE)
    cluster.start_all()
    old = elect(cluster)
    for other in THREE:
        if other != old:
            cluster.cut(other, old)  # the leader still reaches them, their fetches are lost
    cluster.run_for(6.0)
    new = cluster.leader_id()
    assert new is not None and new != old
    assert raft(cluster, old).role is not Role.LEADER
    cluster.heal()
    commit_everywhere(cluster, 3)


def test_a_bridge_node_keeps_the_quorum_going_without_new_epochs():
    cluster = SimulatedCluster(seed=5, voters=FIVE)
    cluster.start_all()
    leader = elect(cluster)
    epoch = raft(cluster, leader).epoch
    # The leader's side and the far side reach each other only through the bridge node.
    bridge = next(n for n in FIVE if n != leader)
    near = [leader, *(n for n in FIVE if n not in (leader, bridge))][:2]
    far = [n for n in FIVE if n not in (*near, bridge)]
    for a in near:
        for b in far:
            cluster.cut(a, b)
            cluster.cut(b, a)
    cluster.run_for(10.0)
    # The far side cannot fetch; its pre-votes fail, as the bridge hears from the leader.
    assert cluster.leader_id() == leader and raft(cluster, leader).epoch == epoch
    commit_everywhere_but(cluster, far[0], 5)
    assert all(raft(cluster, n).epoch == epoch for n in FIVE)
    cluster.heal()
    commit_everywhere(cluster, 5)


def test_a_crashed_follower_loses_its_unflushed_tail_and_catches_up():
    cluster = SimulatedCluster(
        seed=6, voters=THREE, disk=DiskConditions(min_flush=0.05, max_flush=0.2)
    )
    cluster.start_all()
    leader = elect(cluster)
    follower = next(n for n in THREE if n != leader)
    lost = False
    for _ in range(200):
        cluster.client_append(leader)
        cluster.run_for(0.003)
        disk = cluster.nodes[follower].disk
        if disk.flushed_offset < disk.end_offset:
            cluster.crash(follower)
            lost = True
            break
    assert lost, "the follower never had an unflushed tail to lose"
    cluster.run_for(1.0)
    cluster.start(follower)
    commit_everywhere(cluster, 3)


def test_a_crashed_leader_is_replaced_and_rejoins_as_a_follower():
    cluster = SimulatedCluster(seed=7, voters=FIVE)
    cluster.start_all()
    commit_everywhere(cluster, 5)
    old = elect(cluster)
    cluster.crash(old)
    new = elect(cluster)
    assert new != old
    cluster.start(old)  # resumes resigned in its old epoch, then learns the new leader
    commit_everywhere(cluster, 5)
    assert raft(cluster, old).role is Role.FOLLOWER


def test_a_resigning_leader_hands_over_at_once_to_its_most_caught_up_voter():
    cluster = SimulatedCluster(seed=8, voters=FIVE)
    cluster.start_all()
    commit_everywhere(cluster, 5)
    old = elect(cluster)
    resigned_at = cluster.now
    cluster.resign(old)
    assert raft(cluster, old).role is Role.RESIGNED
    new = elect(cluster)
    # Well under an election timeout (1-2 s): the first successor stands at once.
    assert new != old and cluster.now - resigned_at < 0.5
    assert cluster.sent[old, "EndQuorumEpochRequest"] >= 4


def test_a_diverged_follower_truncates_to_the_leader_log():
    cluster = SimulatedCluster(seed=9, voters=THREE)
    common = [
        LogEntry(base_offset=0, epoch=1, records=(b"leader 1",), is_control=True),
        LogEntry(base_offset=1, epoch=1, records=(b"a", b"b")),
    ]
    # Node 3 led epoch 2 alone; nodes 1 and 2 then elected 1 in epoch 3 and moved on.
    stale = [LogEntry(base_offset=3, epoch=2, records=(b"lost %d" % i,)) for i in range(4)]
    stale = [LogEntry(base_offset=3 + i, epoch=2, records=e.records) for i, e in enumerate(stale)]
    newer = [LogEntry(base_offset=3, epoch=3, records=(b"kept",))]
    for node_id, tail, state in [
        (1, newer, ElectionState(epoch=3, leader_id=1, voted_id=1, voters=THREE)),
        (2, newer, ElectionState(epoch=3, leader_id=1, voted_id=1, voters=THREE)),
        (3, stale, ElectionState(epoch=2, leader_id=3, voted_id=3, voters=THREE)),
    ]:
        for entry in common + tail:
            cluster.nodes[node_id].disk.append(entry)
        cluster.nodes[node_id].disk.flush()
        cluster.nodes[node_id].store.write(state)
    cluster.start_all()
    commit_everywhere(cluster, 3)
    records = [e.records for e in cluster.nodes[3].disk.read(3)]
    assert records[0] == (b"kept",) and (b"lost 0",) not in records


@pytest.mark.parametrize("minority", [(1,), (4, 5)])
def test_a_partitioned_minority_never_raises_the_epoch(minority):
    cluster = SimulatedCluster(seed=10, voters=FIVE)
    cluster.start_all()
    commit_everywhere(cluster, 3)
    leader = cluster.leader_id()
    if leader in minority:
        minority = tuple(n for n in FIVE if n != leader)[: len(minority)]
    epoch = raft(cluster, leader).epoch
    majority = tuple(n for n in FIVE if n not in minority)
    cluster.partition(minority, majority)
    cluster.run_for(30.0)
    assert all(raft(cluster, n).epoch == epoch for n in FIVE)
    cluster.heal()
    commit_everywhere(cluster, 3)
    assert cluster.leader_id() == leader
