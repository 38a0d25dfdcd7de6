"""The network nemesis's aim, without namespaces: which links each network fault cuts around its
target, and that every one is held past the broker session."""

from __future__ import annotations

import pytest

from tests.chaos import runner
from tests.integration.netns import Network


class RecordedNetwork(Network):
    """A `Network` that only records its cuts (no namespace is created)."""

    def cut(self, source: int, destination: int) -> None:
        self.cuts.add((source, destination))


def cuts(fault: str, target: float, node_id: int) -> set[tuple[int, int]]:
    step = runner.Step(fault=fault, target=target, hold_s=5.0, gap_s=1.0)
    return set(runner._cut(step, RecordedNetwork([1, 2, 3]), node_id))


@pytest.mark.parametrize("fault", [runner.PARTITION_LEADER, runner.PARTITION_CONTROLLER])
def test_a_partition_cuts_the_target_from_both_others_both_ways(fault: str) -> None:
    assert cuts(fault, 0.5, 2) == {(2, 1), (1, 2), (2, 3), (3, 2)}


def test_one_way_drops_either_what_the_leader_sends_or_what_it_hears() -> None:
    sent_dropped, heard_dropped = {(2, 1), (2, 3)}, {(1, 2), (3, 2)}
    outcomes = {frozenset(cuts(runner.ONE_WAY, target / 100, 2)) for target in range(100)}
    assert outcomes == {frozenset(sent_dropped), frozenset(heard_dropped)}


def test_bridge_cuts_the_target_from_one_node_and_keeps_the_third_in_the_middle() -> None:
    outcomes = {frozenset(cuts(runner.BRIDGE, target / 100, 2)) for target in range(100)}
    assert outcomes == {frozenset({(2, 1), (1, 2)}), frozenset({(2, 3), (3, 2)})}


@pytest.mark.parametrize("fault", runner.NETWORK_FAULTS)
def test_every_network_fault_outlasts_the_broker_session(fault: str) -> None:
    assert runner.SCENARIOS[fault].needs_network
    for seed in range(1, 30):
        for step in runner.schedule(runner.SCENARIOS[fault], seed):
            assert step.hold_s > runner.SESSION_TIMEOUT_MS / 1000
