"""Thousands of seeded runs of a quorum under random faults, invariants checked after every
step; a failure prints the command that replays its seed (see README.md)."""

from __future__ import annotations

from tests.simulation.scenarios import run_with_faults
from tests.simulation.seeds import run_seeds

# Sized so that the whole directory runs in about two minutes on a slow two-core machine;
# MOLDAU_SIM_SEEDS raises them for a campaign.
THREE_VOTER_SEEDS = 1000
FIVE_VOTER_SEEDS = 500


def test_three_voters_under_faults():
    results = run_seeds(
        "test_three_voters_under_faults",
        THREE_VOTER_SEEDS,
        lambda seed: run_with_faults(seed, voters=(1, 2, 3)),
    )
    # The runs did something: entries committed, leaders changed, snapshots were installed.
    assert sum(r.committed for r in results) > 10 * len(results)
    assert sum(r.leaders for r in results) > len(results)
    assert sum(r.snapshots_installed for r in results) > 0


def test_five_voters_and_an_observer_under_faults():
    results = run_seeds(
        "test_five_voters_and_an_observer_under_faults",
        FIVE_VOTER_SEEDS,
        lambda seed: run_with_faults(seed, voters=(1, 2, 3, 4, 5), observers=(6,)),
    )
    assert sum(r.committed for r in results) > 10 * len(results)
    assert sum(r.leaders for r in results) > len(results)
    assert sum(r.snapshots_installed for r in results) > 0
