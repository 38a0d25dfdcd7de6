"""Seeded runs of the controller deciding partition leadership while brokers lag, crash,
restart, shut down and race with AlterPartition; invariants after every commit (see
leadership.py). A failure prints the command that replays its seed."""

from __future__ import annotations

import dataclasses

import pytest

from moldau.controller import partition_change, partition_control
from moldau.controller.cluster_control import BrokerHeartbeats
from moldau.controller.partition_change import Election
from moldau.metadata.image import PartitionImage
from tests.simulation.leadership import InvariantViolation, LeadershipSimulation
from tests.simulation.seeds import run_seeds

SEEDS = 300
STEPS = 400


def test_partition_leadership_under_faults():
    results = run_seeds(
        "test_partition_leadership_under_faults",
        SEEDS,
        lambda seed: LeadershipSimulation(seed).run(STEPS),
    )
    # The runs did something: leaders moved, ISRs changed both ways, races were lost.
    assert sum(r.leader_changes for r in results) > 10 * len(results)
    assert sum(r.alter_partition_accepted for r in results) > 10 * len(results)
    assert sum(r.alter_partition_refused for r in results) > len(results)
    assert sum(r.controlled_shutdowns for r in results) > len(results)
    assert sum(r.unclean_elections for r in results) > 0
    # Reassignments started, completed by AlterPartition and cancelled.
    assert sum(r.reassignments_started for r in results) > len(results)
    assert sum(r.reassignments_completed for r in results) > len(results) // 4
    assert sum(r.reassignments_cancelled for r in results) > len(results) // 4


def test_one_rack_three_brokers_under_faults():
    results = run_seeds(
        "test_one_rack_three_brokers_under_faults",
        SEEDS // 2,
        lambda seed: LeadershipSimulation(seed, brokers=3, racks=0).run(STEPS),
    )
    assert sum(r.leader_changes for r in results) > 10 * len(results)


# --- the checker can fail: a controller with a planted bug is caught within a few seeds -----

SEEDS_TO_CATCH = 50


def _leaves_leaderships_behind(image, config, broker_id):
    return []


def _skips_epoch_checks(image, broker_id, topic, partition, change):
    fresh = dataclasses.replace(
        change, leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch
    )
    return original_check_isr_change(image, partition.leader, topic, partition, fresh)


def _always_unclean(image, config, topic):
    return Election.UNCLEAN


def _nobody_to_wait_for(self, image):
    return None


def _keeps_leader_epochs(self, record):
    bumped = original_merge(self, record)
    return dataclasses.replace(bumped, leader_epoch=self.leader_epoch)


def _completes_without_the_isr(replicas, isr, removing):
    return tuple(r for r in replicas if r not in removing), tuple(isr)


original_check_isr_change = partition_control._check_isr_change
original_merge = PartitionImage.merge

PLANTED_BUGS = {
    "fencing leaves leaderships behind": (
        partition_control,
        "broker_leaves",
        _leaves_leaderships_behind,
    ),
    "AlterPartition skips epoch checks": (
        partition_control,
        "_check_isr_change",
        _skips_epoch_checks,
    ),
    "every election may be unclean": (partition_control, "online_or_unclean", _always_unclean),
    "controlled shutdown waits for nobody": (
        BrokerHeartbeats,
        "lowest_active_offset",
        _nobody_to_wait_for,
    ),
    "leader epochs do not move": (PartitionImage, "merge", _keeps_leader_epochs),
    "a reassignment completes before its replicas are in sync": (
        partition_change,
        "_complete_reassignment",
        _completes_without_the_isr,
    ),
}


@pytest.mark.parametrize("bug", sorted(PLANTED_BUGS))
def test_a_planted_controller_bug_is_caught(bug, monkeypatch):
    owner, name, planted = PLANTED_BUGS[bug]
    monkeypatch.setattr(owner, name, planted)
    for seed in range(SEEDS_TO_CATCH):
        try:
            LeadershipSimulation(seed).run(STEPS)
        except InvariantViolation:
            return
    pytest.fail(f"{bug!r} went unnoticed for {SEEDS_TO_CATCH} seeds")
