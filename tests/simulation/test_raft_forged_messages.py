"""Seeded runs of a quorum that a forger floods with lying quorum messages (`forgery.py`), the
invariants checked after every step: one leader per epoch, committed entries never lost, and
the quorum committing on. A node that turned a lie into a failure (Kafka's IllegalStateException,
once Moldau's RaftSafetyError) fails the run at the step that received it."""

from __future__ import annotations

from tests.simulation.cluster import NetworkConditions, SimulatedCluster
from tests.simulation.forgery import Forger
from tests.simulation.scenarios import run_with_faults
from tests.simulation.seeds import run_seeds

# Sized for CI (about half a minute); MOLDAU_SIM_SEEDS raises them for a campaign.
FAULT_SEEDS = 100
DYNAMIC_SEEDS = 30
FLOOD_SEEDS = 20


def test_forged_messages_under_faults_break_no_invariant():
    results = run_seeds(
        "test_forged_messages_under_faults_break_no_invariant",
        FAULT_SEEDS,
        lambda seed: run_with_faults(seed, voters=(1, 2, 3), forger=True),
    )
    assert sum(r.forged for r in results) > 200 * len(results)
    assert sum(r.refused for r in results) > 50 * len(results)
    assert sum(r.committed for r in results) > 10 * len(results)


def test_forged_messages_with_dynamic_voters_changing_break_no_invariant():
    results = run_seeds(
        "test_forged_messages_with_dynamic_voters_changing_break_no_invariant",
        DYNAMIC_SEEDS,
        lambda seed: run_with_faults(
            seed,
            voters=(1, 2, 3),
            observers=(4, 5),
            dynamic=True,
            bootstrap=(1, 2, 3),
            voter_changes=True,
            forger=True,
        ),
    )
    assert sum(r.refused for r in results) > 50 * len(results)
    assert sum(r.committed for r in results) > 10 * len(results)


def flood(seed: int) -> dict[str, int]:
    """A healthy quorum of three flooded with lies that must be refused (about 100 a second)
    for 20 simulated seconds while a client appends: the leader stays leader of its epoch and
    every record offered to it commits on every node."""
    cluster = SimulatedCluster(
        seed=seed,
        voters=(1, 2, 3),
        network=NetworkConditions(min_delay=0.0005, max_delay=0.005),
    )
    cluster.start_all()
    assert cluster.run_for(15.0, stop=lambda: cluster.leader_id() is not None)
    leader_id = cluster.leader_id()
    assert leader_id is not None
    # Let every follower hear from the leader (a follower that has not may still be told of
    # another leader of the epoch by the one that claims it).
    cluster.run_for(1.0)
    leader = cluster.nodes[leader_id].raft
    assert leader is not None
    epoch = leader.epoch
    forger = Forger(cluster)
    forger.schedule(until=cluster.now + 20.0, mean_interval=0.01)
    offered = []
    for _ in range(100):
        appended = cluster.client_append(leader_id)
        assert appended is not None, cluster.describe_state()
        offered.append(appended[2])
        cluster.run_for(0.2)
    last = offered[-1]
    assert cluster.run_for(
        5.0, stop=lambda: all(n.applied_offset > last for n in cluster.live_nodes())
    ), f"record {last} did not commit everywhere\n{cluster.describe_state()}"
    assert (cluster.leader_id(), leader.epoch) == (leader_id, epoch), cluster.describe_state()
    assert set(cluster.checker.leaders) <= {epoch} | set(range(epoch))
    cluster.checker.assert_converged()
    assert cluster.refused["leader"] > 0 and cluster.refused["cluster-id"] > 0
    return dict(cluster.refused)


def test_a_flood_of_refused_lies_moves_no_leader_and_the_quorum_commits_on():
    results = run_seeds(
        "test_a_flood_of_refused_lies_moves_no_leader_and_the_quorum_commits_on", FLOOD_SEEDS, flood
    )
    kinds = set().union(*results)
    assert kinds >= {"leader", "cluster-id", "voter-key", "sender", "epoch"}, kinds
