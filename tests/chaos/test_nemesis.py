"""The nemesis's aim, without namespaces or clusters: which links each network fault cuts around
its target, how far and at whom the clock jumps go, and that every fault is held past the broker
session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import clock, runner
from tests.integration.cluster import Cluster, ClusterNode
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


@pytest.mark.parametrize("scenario", [clock.CLOCK_JUMP, clock.CLOCK_JUMP_ALL])
def test_every_clock_jump_is_within_its_bounds_and_outlasts_the_session(scenario: str) -> None:
    assert runner.SCENARIOS[scenario].needs_clock
    directions = set()
    for seed in range(1, 30):
        for step in runner.schedule(runner.SCENARIOS[scenario], seed):
            assert step.hold_s > runner.SESSION_TIMEOUT_MS / 1000
            assert len(step.offsets_s) == (3 if scenario == clock.CLOCK_JUMP_ALL else 1)
            for offset in step.offsets_s:
                assert clock.SMALLEST_JUMP_S <= abs(offset) <= clock.LARGEST_JUMP_S
                directions.add(offset > 0)
    assert directions == {True, False}


def test_a_single_clock_jump_aims_at_a_leader_a_follower_or_the_controller() -> None:
    aimed = {clock.aim(target / 100, 1, [2, 3], 9) for target in range(100)}
    assert aimed == {1, 2, 3, 9}


def test_a_clock_file_holds_the_offset_libfaketime_reads(tmp_path) -> None:
    cluster = Cluster(cluster_id="c")
    for node_id in (1, 2):
        cluster.nodes[node_id] = ClusterNode(
            node_id=node_id, roles="broker", client_port=1, controller_port=None,
            data_dir=tmp_path, overrides={},
        )  # fmt: skip
    clocks = clock.WallClocks(cluster, tmp_path, Path("/lib/libfaketime.so.1"))
    clocks.set(2, -1800)
    assert (tmp_path / "clock-2").read_text() == "-1800\n"
    assert cluster.nodes[2].environment["FAKETIME_TIMESTAMP_FILE"] == str(tmp_path / "clock-2")
    assert cluster.nodes[1].environment["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    clocks.reset()
    assert (tmp_path / "clock-2").read_text() == "+0\n"
