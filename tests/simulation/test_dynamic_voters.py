"""Dynamic voters (KIP-853) in the simulated quorum: a one-voter quorum grows by adding
observers that caught up, shrinks by removing voters (the leader among them, which steps down
once its removal commits), and never has two leaders in one epoch nor loses a committed entry,
under the same faults as the static quorum (invariants after every step)."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.events import AddVoter, RaftAction, RemoveVoter, UpdateVoter
from moldau.raft.leader_state import LeaderState
from moldau.raft.node import NotLeaderError, RaftNode, Role
from moldau.raft.quorum import QuorumState
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.reconfiguration import Reconfiguration
from moldau.raft.voter_set import Endpoint, VoterNode
from tests.simulation.cluster import SimulatedCluster
from tests.simulation.invariants import InvariantViolation
from tests.simulation.scenarios import RecoveryFailure, run_with_faults
from tests.simulation.seeds import run_seeds
from tests.simulation.test_raft_scenarios import commit_everywhere, elect, raft

VOTER_CHANGE_SEEDS = 200
SEEDS_TO_CATCH = 200


def standalone_with_observers(seed: int, observers: tuple[int, ...] = (2, 3)) -> SimulatedCluster:
    """Node 1 formatted --standalone; the others --no-initial-controllers, bootstrapping
    from node 1."""
    cluster = SimulatedCluster(
        seed=seed, voters=(1,), observers=observers, dynamic=True, bootstrap=(1,)
    )
    cluster.start_all()
    return cluster


def add_when_caught_up(cluster: SimulatedCluster, node_id: int, *, within: float = 10.0) -> None:
    """Offer the change until the leader takes it, then wait for it to commit everywhere."""
    assert cluster.run_for(within, stop=lambda: cluster.add_voter(node_id)), (
        f"node {node_id} was never added\n{cluster.describe_state()}"
    )
    commit_everywhere(cluster, 1)
    assert node_id in raft(cluster, cluster.leader_id()).voters


def test_observers_bootstrap_replicate_and_are_added_one_at_a_time():
    cluster = standalone_with_observers(seed=11)
    commit_everywhere(cluster, 5)
    assert raft(cluster, 1).kraft_version == 1
    assert raft(cluster, 2).role is Role.FOLLOWER and not raft(cluster, 2).is_voter
    assert raft(cluster, 2).voters == (1,)  # learned from the leader's log
    assert cluster.add_voter(2)
    with pytest.raises(KafkaError) as pending:
        raft(cluster, 1).step(
            AddVoter(voter=VoterNode(node_id=3, directory_id="directory-3")), cluster.now
        )
    assert pending.value.code == ErrorCode.request_timed_out  # one change at a time
    commit_everywhere(cluster, 1)
    add_when_caught_up(cluster, 3)
    for node_id in (1, 2, 3):
        assert raft(cluster, node_id).voters == (1, 2, 3)
        assert raft(cluster, node_id).is_voter
    described = raft(cluster, cluster.leader_id()).describe()
    assert [v.directory_id for v in described.voters] == [
        "directory-1",
        "directory-2",
        "directory-3",
    ]


def test_the_grown_quorum_survives_the_loss_of_the_first_voter():
    cluster = standalone_with_observers(seed=12)
    commit_everywhere(cluster, 3)
    add_when_caught_up(cluster, 2)
    add_when_caught_up(cluster, 3)
    cluster.crash(1)  # for good
    new_leader = elect(cluster)
    assert new_leader in (2, 3)
    commit_everywhere(cluster, 5)


def test_a_removed_leader_steps_down_and_follows_as_an_observer():
    cluster = standalone_with_observers(seed=13)
    commit_everywhere(cluster, 3)
    add_when_caught_up(cluster, 2)
    add_when_caught_up(cluster, 3)
    leader = cluster.leader_id()
    assert leader is not None
    old_epoch = raft(cluster, leader).epoch
    assert cluster.remove_voter(leader)
    assert cluster.run_for(10.0, stop=lambda: raft(cluster, leader).role is not Role.LEADER), (
        cluster.describe_state()
    )
    new_leader = elect(cluster)
    assert new_leader != leader and raft(cluster, new_leader).epoch > old_epoch
    commit_everywhere(cluster, 5)
    removed = raft(cluster, leader)
    assert not removed.is_voter and leader not in removed.voters
    assert cluster.run_for(5.0, stop=lambda: removed.role is Role.FOLLOWER)
    commit_everywhere(cluster, 2)  # it still replicates the log


def test_the_leader_refuses_changes_it_cannot_make():
    cluster = standalone_with_observers(seed=14, observers=(2,))
    commit_everywhere(cluster, 2)
    leader = raft(cluster, 1)

    def refused(change: AddVoter | RemoveVoter) -> ErrorCode:
        with pytest.raises(KafkaError) as error:
            leader.step(change, cluster.now)
        return error.value.code

    assert refused(AddVoter(voter=VoterNode(node_id=1, directory_id="directory-1"))) == (
        ErrorCode.duplicate_voter
    )
    assert refused(AddVoter(voter=VoterNode(node_id=9, directory_id="x"))) == (
        ErrorCode.request_timed_out  # not an observer that caught up
    )
    assert refused(AddVoter(voter=VoterNode(node_id=2, directory_id="another"))) == (
        ErrorCode.invalid_request  # its fetches name another directory
    )
    assert refused(RemoveVoter(voter_id=2)) == ErrorCode.voter_not_found
    assert refused(RemoveVoter(voter_id=1, directory_id="another")) == ErrorCode.voter_not_found
    assert refused(RemoveVoter(voter_id=1)) == ErrorCode.invalid_request  # the last voter
    with pytest.raises(NotLeaderError):
        raft(cluster, 2).step(RemoveVoter(voter_id=1), cluster.now)


def test_a_voter_updates_its_endpoints_and_everyone_learns_them():
    cluster = standalone_with_observers(seed=17, observers=(2,))
    commit_everywhere(cluster, 2)
    add_when_caught_up(cluster, 2)
    moved = VoterNode(
        node_id=2,
        directory_id="directory-2",
        endpoints=(Endpoint(name="CONTROLLER", host="10.0.0.2", port=9093),),
    )
    leader = raft(cluster, cluster.leader_id())
    with pytest.raises(KafkaError) as unknown:
        leader.step(UpdateVoter(voter=VoterNode(node_id=2, directory_id="another")), cluster.now)
    assert unknown.value.code == ErrorCode.voter_not_found
    cluster.step(cluster.nodes[cluster.leader_id()], UpdateVoter(voter=moved))
    commit_everywhere(cluster, 1)
    for node_id in (1, 2):
        assert raft(cluster, node_id).voter_set.get(2) == moved
    before = leader.log_end_offset
    cluster.step(cluster.nodes[cluster.leader_id()], UpdateVoter(voter=moved))
    assert leader.log_end_offset == before  # nothing changed: nothing appended


def test_a_voter_whose_disk_was_replaced_does_not_vote_as_the_voter_it_was():
    """KIP-853's reason for directory ids: a voter comes back with an empty log in a new
    directory and has fetched only the start of the log when the leader dies; were its vote
    counted, the voter that missed the last committed entries could be elected with it."""
    cluster = SimulatedCluster(
        seed=18,
        voters=(1, 2, 3),
        dynamic=True,
        bootstrap=(1, 2, 3),
        config=QuorumConfig(fetch_max_bytes=100),  # an entry per fetch
    )
    cluster.start_all()
    commit_everywhere(cluster, 2)
    leader = elect(cluster)
    wiped, lagging = (n for n in (1, 2, 3) if n != leader)
    cluster.isolate(lagging)
    for _ in range(5):  # committed on the leader and `wiped` only
        assert cluster.client_append(leader) is not None
        cluster.run_for(0.2)
    committed = cluster.checker.committed_end
    assert cluster.nodes[lagging].disk.end_offset < committed
    cluster.crash(wiped)
    cluster.replace_disk(wiped, f"directory-{wiped}-new")
    cluster.start(wiped)
    assert cluster.run_for(5.0, stop=lambda: cluster.nodes[wiped].disk.flushed_offset > 0)
    assert raft(cluster, wiped).kraft_version == 1 and not raft(cluster, wiped).is_voter
    cluster.crash(leader)
    cluster.crash(wiped)  # (restarted, it no longer follows the dead leader: it would vote)
    cluster.start(wiped)
    cluster.heal()
    cluster.run_for(20.0)
    assert cluster.leader_id() is None, cluster.describe_state()  # no vote from `wiped`
    cluster.start(leader)
    assert elect(cluster, within=30.0) in (leader, lagging)
    commit_everywhere(cluster, 1)
    assert cluster.nodes[wiped].applied_offset >= committed  # it caught up as an observer


def test_static_voters_refuse_voter_changes():
    cluster = SimulatedCluster(seed=15, voters=(1, 2, 3))
    cluster.start_all()
    commit_everywhere(cluster, 2)
    leader = raft(cluster, cluster.leader_id())
    with pytest.raises(KafkaError) as error:
        leader.step(RemoveVoter(voter_id=3), cluster.now)
    assert error.value.code == ErrorCode.unsupported_version
    assert leader.kraft_version == 0


def test_an_uncommitted_voter_change_is_undone_with_the_entry_that_held_it():
    cluster = standalone_with_observers(seed=16, observers=(2, 3, 4))
    commit_everywhere(cluster, 2)
    add_when_caught_up(cluster, 2)
    add_when_caught_up(cluster, 3)
    leader = cluster.leader_id()
    assert leader is not None
    # The leader appends "add 4" and is cut off before anyone fetches it.
    cluster.isolate(leader)
    assert cluster.add_voter(4)
    assert raft(cluster, leader).voters == (1, 2, 3, 4)
    others = [n for n in (1, 2, 3) if n != leader]
    assert cluster.run_for(
        15.0,
        stop=lambda: any(raft(cluster, n).role is Role.LEADER for n in others),
    ), cluster.describe_state()
    commit_everywhere_but_isolated(cluster, leader)
    cluster.heal()
    commit_everywhere(cluster, 3)
    # The old leader's "add 4" was truncated; its voter set is the quorum's again.
    assert raft(cluster, leader).voters == (1, 2, 3)
    assert not raft(cluster, 4).is_voter


def commit_everywhere_but_isolated(cluster: SimulatedCluster, isolated: int) -> None:
    leader = elect(cluster)
    appended = cluster.client_append(leader)
    assert appended is not None
    offset = appended[2]
    assert cluster.run_for(
        10.0,
        stop=lambda: all(
            n.applied_offset > offset for n in cluster.live_nodes() if n.node_id != isolated
        ),
    ), cluster.describe_state()


def test_voter_changes_under_faults():
    results = run_seeds(
        "test_voter_changes_under_faults",
        VOTER_CHANGE_SEEDS,
        lambda seed: run_with_faults(
            seed,
            voters=(1,),
            observers=(2, 3, 4, 5),
            dynamic=True,
            bootstrap=(1, 2, 3),
            voter_changes=True,
        ),
    )
    assert sum(r.committed for r in results) > 10 * len(results)
    assert sum(r.leaders for r in results) > len(results)


def test_three_initial_controllers_under_faults_with_voter_changes():
    results = run_seeds(
        "test_three_initial_controllers_under_faults_with_voter_changes",
        VOTER_CHANGE_SEEDS // 2,
        lambda seed: run_with_faults(
            seed,
            voters=(1, 2, 3),
            observers=(4, 5),
            dynamic=True,
            bootstrap=(1, 2, 3),
            voter_changes=True,
        ),
    )
    assert sum(r.committed for r in results) > 10 * len(results)


class _ReconfigurationWithoutWaiting(Reconfiguration):
    def ready_for_voter_change(self) -> LeaderState:
        leader = self.quorum.state
        if not isinstance(leader, LeaderState):
            raise NotLeaderError(self.quorum.leader_id, self.quorum.epoch)
        return leader


class ChangesVotersConcurrently(RaftNode):
    """A leader that takes a voter change while an earlier one is not committed."""

    reconfiguration_class = _ReconfigurationWithoutWaiting


class _QuorumKeepingItsMajority(QuorumState):
    def on_voters_changed(self, now: float, actions: list[RaftAction]) -> None:
        if self.role is not Role.LEADER:
            super().on_voters_changed(now, actions)


class CountsTheOldMajority(RaftNode):
    """A leader that keeps counting the voters it was elected with after a voter change."""

    quorum_class = _QuorumKeepingItsMajority


@pytest.mark.parametrize("bug", [ChangesVotersConcurrently, CountsTheOldMajority])
def test_a_planted_voter_change_bug_is_caught(bug):
    def run(seed: int) -> None:
        run_with_faults(
            seed,
            voters=(1,),
            observers=(2, 3, 4, 5),
            dynamic=True,
            bootstrap=(1, 2, 3),
            voter_changes=True,
            node_factory=bug,
        )

    for seed in range(SEEDS_TO_CATCH):
        try:
            run(seed)
        except (InvariantViolation, RecoveryFailure):
            return
    pytest.fail(f"{bug.__name__} was not caught in {SEEDS_TO_CATCH} seeds")
