"""A static quorum upgraded to dynamic voters (KIP-853's kraft.version 0 -> 1) in the simulated
quorum: the leader's checks and answers, the control entry that switches the voter set at its
offset (undone with a truncated tail), voter changes afterwards (one that needs the vote of a
voter whose log is still at kraft.version 0), restarts that keep the dynamic voters although
the static ones are still configured, and seeded runs under faults."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.control_records import control_changes
from moldau.raft.events import RemoveVoter, UpgradeKRaftVersion
from moldau.raft.node import NotLeaderError, Role
from moldau.raft.voter_set import VoterNode, VoterSet
from tests.simulation.cluster import SimulatedCluster, static_endpoints
from tests.simulation.scenarios import run_with_faults
from tests.simulation.seeds import run_seeds
from tests.simulation.test_dynamic_voters import add_when_caught_up
from tests.simulation.test_raft_scenarios import commit_everywhere, elect, raft

UPGRADE_SEEDS = 100

STATIC = (1, 2, 3)


def static_quorum(seed: int, observers: tuple[int, ...] = ()) -> SimulatedCluster:
    cluster = SimulatedCluster(seed=seed, voters=STATIC, observers=observers)
    cluster.start_all()
    commit_everywhere(cluster, 2)
    return cluster


def upgraded_voters() -> VoterSet:
    return VoterSet.of_nodes(
        VoterNode(node_id=i, directory_id=f"directory-{i}", endpoints=static_endpoints(i))
        for i in STATIC
    )


def refusal(cluster: SimulatedCluster, event: object) -> ErrorCode:
    leader = raft(cluster, cluster.leader_id())
    with pytest.raises(KafkaError) as error:
        leader.step(event, cluster.now)  # type: ignore[arg-type]
    return error.value.code


def test_the_upgrade_writes_the_static_voters_with_directory_ids_in_one_control_entry():
    cluster = static_quorum(seed=21)
    leader = raft(cluster, cluster.leader_id())
    start = leader.log_end_offset
    assert cluster.upgrade_kraft_version()
    entry = next(iter(cluster.nodes[leader.node_id].disk.read(start)))
    assert entry.is_control and entry.next_offset == leader.log_end_offset
    changes = control_changes(entry.records)
    assert changes.kraft_version == 1 and changes.voters == upgraded_voters()
    commit_everywhere(cluster, 1)
    for node_id in STATIC:
        node = raft(cluster, node_id)
        assert node.kraft_version == 1 and node.voter_set == upgraded_voters()
        assert node.kraft_version_at(start - 1) == 0  # the switch is at the entry's offset
    described = raft(cluster, cluster.leader_id()).describe()
    assert described.kraft_version == 1
    assert [v.directory_id for v in described.voters] == [f"directory-{i}" for i in STATIC]


def test_validate_only_appends_nothing_and_asking_again_changes_nothing():
    cluster = static_quorum(seed=22)
    leader = raft(cluster, cluster.leader_id())
    before = leader.log_end_offset
    assert cluster.upgrade_kraft_version(validate_only=True)
    assert leader.log_end_offset == before and leader.kraft_version == 0
    assert cluster.upgrade_kraft_version()
    appended = leader.log_end_offset
    assert cluster.upgrade_kraft_version()  # in flight: Kafka's no-op
    commit_everywhere(cluster, 1)
    after = leader.log_end_offset
    assert cluster.upgrade_kraft_version()  # committed: a no-op too
    assert leader.log_end_offset == after and appended > before


def test_the_leader_refuses_an_upgrade_it_cannot_make():
    cluster = static_quorum(seed=23)
    assert refusal(cluster, UpgradeKRaftVersion(version=2)) == ErrorCode.invalid_update_version
    follower = next(n for n in STATIC if n != cluster.leader_id())
    with pytest.raises(NotLeaderError):
        raft(cluster, follower).step(UpgradeKRaftVersion(version=1), cluster.now)
    assert cluster.upgrade_kraft_version()
    # A voter change waits for the upgrade to commit: one change at a time.
    assert refusal(cluster, RemoveVoter(voter_id=follower)) == ErrorCode.request_timed_out
    commit_everywhere(cluster, 1)
    assert refusal(cluster, UpgradeKRaftVersion(version=0)) == ErrorCode.invalid_update_version


def test_the_leader_waits_for_every_voters_directory_id():
    """A voter that has not fetched from this leader: its directory id is unknown, and
    the leader refuses (INVALID_UPDATE_VERSION, as Kafka while a voter has not told it)."""
    cluster = SimulatedCluster(seed=24, voters=STATIC)
    cluster.start_all()
    leader_id = elect(cluster)
    silent = next(n for n in STATIC if n != leader_id)
    cluster.crash(silent)
    cluster.crash(leader_id)
    cluster.start(leader_id)
    new_leader = elect(cluster, within=30.0)
    commit_everywhere(cluster, 1)
    assert silent not in (new_leader,)
    assert refusal(cluster, UpgradeKRaftVersion(version=1)) == ErrorCode.invalid_update_version
    cluster.start(silent)
    commit_everywhere(cluster, 1)
    assert cluster.upgrade_kraft_version()
    commit_everywhere(cluster, 1)
    assert raft(cluster, silent).kraft_version == 1


def test_the_upgrade_waits_for_the_leader_to_commit_in_its_epoch():
    cluster = static_quorum(seed=25)
    leader_id = cluster.leader_id()
    others = [n for n in STATIC if n != leader_id]
    cluster.partition((leader_id,), tuple(others))
    assert cluster.run_for(
        15.0, stop=lambda: any(raft(cluster, n).role is Role.LEADER for n in others)
    )
    new_leader = raft(cluster, next(n for n in others if raft(cluster, n).is_leader))
    if new_leader.high_watermark <= new_leader.epoch_start_offset:
        with pytest.raises(KafkaError) as error:
            new_leader.step(UpgradeKRaftVersion(version=1), cluster.now)
        assert error.value.code == ErrorCode.request_timed_out


def test_a_truncated_upgrade_takes_the_node_back_to_the_static_voters():
    cluster = static_quorum(seed=26)
    leader_id = cluster.leader_id()
    assert leader_id is not None
    cluster.isolate(leader_id)
    assert cluster.upgrade_kraft_version()
    assert raft(cluster, leader_id).kraft_version == 1
    others = [n for n in STATIC if n != leader_id]
    assert cluster.run_for(
        15.0, stop=lambda: any(raft(cluster, n).role is Role.LEADER for n in others)
    ), cluster.describe_state()
    commit_everywhere_but(cluster, leader_id)
    cluster.heal()
    commit_everywhere(cluster, 2)
    old = raft(cluster, leader_id)
    assert old.kraft_version == 0 and old.voter_set == VoterSet.of(STATIC)
    assert cluster.upgrade_kraft_version()
    commit_everywhere(cluster, 1)
    assert all(raft(cluster, n).voter_set == upgraded_voters() for n in STATIC)


def commit_everywhere_but(cluster: SimulatedCluster, isolated: int) -> None:
    leader = elect(cluster)
    appended = cluster.client_append(leader)
    assert appended is not None
    assert cluster.run_for(
        10.0,
        stop=lambda: all(
            n.applied_offset > appended[2] for n in cluster.live_nodes() if n.node_id != isolated
        ),
    ), cluster.describe_state()


def test_voters_change_after_the_upgrade_and_restarts_keep_the_dynamic_voter_set():
    """Every node keeps `controller.quorum.voters` = 1, 2, 3 in its configuration; once the
    log holds a VotersRecord that is what counts, after restarts and from snapshots too."""
    cluster = static_quorum(seed=27, observers=(4,))
    assert cluster.upgrade_kraft_version()
    commit_everywhere(cluster, 1)
    add_when_caught_up(cluster, 4)
    assert cluster.run_for(10.0, stop=lambda: cluster.remove_voter(1))
    commit_everywhere(cluster, 2)
    expected = (2, 3, 4)
    assert all(raft(cluster, n).voters == expected for n in (1, 2, 3, 4))
    for node_id in (2, 3):
        assert cluster.take_snapshot(node_id) is not None
    for node_id in (1, 2, 3, 4):
        cluster.crash(node_id)
    for node_id in (1, 2, 3, 4):
        cluster.start(node_id)
        assert raft(cluster, node_id).voters == expected
        assert raft(cluster, node_id).kraft_version == 1
    leader = elect(cluster, within=30.0)
    assert leader in expected
    commit_everywhere(cluster, 2)
    assert not raft(cluster, 1).is_voter and raft(cluster, 1).role is Role.FOLLOWER


def test_a_voter_added_before_it_fetched_the_upgrade_answers_the_votes_of_the_new_set():
    """What seed 599 of the runs under faults reached, step by step: observer 4 caught up, was
    cut off, missed the upgrade and was added as a voter (it had caught up within the fetch
    timeout; Kafka asks less); two removals then leave the leader and 4, the second cannot
    commit without 4, and the leader resigns (check-quorum). Once healed, 4's log still says
    kraft.version 0 with the static voters 1, 2, 3: 4 does not know it is a voter, yet the
    leader can win only with its vote. It answers (pre-)votes whatever its own voter set, as
    Kafka since KIP-853, and learns it is a voter by fetching from the leader it elected."""
    cluster = static_quorum(seed=28, observers=(4,))
    leader_id = cluster.leader_id()
    assert leader_id is not None
    removed = [n for n in STATIC if n != leader_id]
    assert cluster.run_for(5.0, stop=lambda: observer_caught_up(cluster, leader_id, 4))
    cluster.isolate(4)
    assert cluster.upgrade_kraft_version()
    commit_everywhere_but(cluster, 4)
    assert cluster.add_voter(4)  # it fetched the leader's log end within the fetch timeout
    commit_everywhere_but(cluster, 4)
    assert cluster.remove_voter(removed[0])
    commit_everywhere_but(cluster, 4)
    assert cluster.remove_voter(removed[1])  # (leader, 4): commits only with 4
    stranded = raft(cluster, 4)
    assert stranded.kraft_version == 0 and not stranded.is_voter
    assert cluster.run_for(5.0, stop=lambda: cluster.leader_id() is None)  # check-quorum
    cluster.heal()
    elect(cluster, within=30.0)
    commit_everywhere(cluster, 2)
    expected = (leader_id, 4)
    for node_id in (*STATIC, 4):
        node = raft(cluster, node_id)
        assert node.kraft_version == 1 and node.voters == tuple(sorted(expected))
    assert raft(cluster, 4).is_voter and cluster.leader_id() in expected


def observer_caught_up(cluster: SimulatedCluster, leader_id: int, observer_id: int) -> bool:
    """The leader has seen `observer_id` fetch from its log end."""
    leader = raft(cluster, leader_id)
    return any(
        o.replica_id == observer_id and o.log_end_offset == leader.log_end_offset
        for o in leader.describe().observers
    )


def test_a_static_quorum_upgraded_under_faults_then_changing_voters():
    results = run_seeds(
        "test_a_static_quorum_upgraded_under_faults_then_changing_voters",
        UPGRADE_SEEDS,
        lambda seed: run_with_faults(
            seed,
            voters=STATIC,
            observers=(4, 5),
            kraft_upgrade=True,
            voter_changes=True,
        ),
    )
    assert sum(r.committed for r in results) > 10 * len(results)
