"""The nemesis's aim, without namespaces or clusters: which links each network fault cuts around
its target, how far and at whom the clock jumps go, and that every fault is held past the broker
session."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable

import pytest

from tests.chaos import clock, runner
from tests.integration.cluster import Cluster, ClusterNode
from tests.integration.netns import Network


class RecordedNetwork(Network):
    """A `Network` that only records its cuts (no namespace is created)."""

    def cut(self, source: int, destination: int) -> None:
        self.cuts.add((source, destination))

    def slow(
        self, source: int, destinations: Iterable[int], *, rate_kbit: int, queue_ms: int
    ) -> None:
        self.slow_links.update((source, destination) for destination in destinations)
        self.caps = (rate_kbit, queue_ms)


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


def test_a_slow_link_caps_what_the_leader_sends_or_both_ways_within_the_bounds() -> None:
    outcomes = set()
    for target in range(100):
        network = RecordedNetwork([1, 2, 3])
        step = runner.Step(fault=runner.SLOW_LINK, target=target / 100, hold_s=5.0, gap_s=1.0)
        details = runner._slow(step, network, 2)
        assert network.cuts == set()
        assert details["slow_links"] == sorted(network.slow_links)
        assert runner.SLOW_RATES_KBIT[0] <= details["rate_kbit"] <= runner.SLOW_RATES_KBIT[1]
        assert runner.SLOW_QUEUES_MS[0] <= details["queue_ms"] <= runner.SLOW_QUEUES_MS[1]
        outcomes.add(frozenset(network.slow_links))
    sent = {(2, 1), (2, 3)}
    assert outcomes == {frozenset(sent), frozenset(sent | {(1, 2), (3, 2)})}


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


def test_a_clock_file_holds_the_offset_the_library_reads(tmp_path) -> None:
    cluster = Cluster(cluster_id="c")
    for node_id in (1, 2):
        cluster.nodes[node_id] = ClusterNode(
            node_id=node_id, roles="broker", client_port=1, controller_port=None,
            data_dir=tmp_path, overrides={},
        )  # fmt: skip
    clocks = clock.WallClocks(cluster, tmp_path, tmp_path / "wall-clock-offset.so")
    clocks.set(2, -1800)
    assert (tmp_path / "clock-2").read_text() == "-1800\n"
    assert cluster.nodes[2].environment[clock.OFFSET_FILE_VARIABLE] == str(tmp_path / "clock-2")
    assert cluster.nodes[1].environment["LD_PRELOAD"] == str(tmp_path / "wall-clock-offset.so")
    clocks.reset()
    assert (tmp_path / "clock-2").read_text() == "+0\n"


# A child process under the library: its wall clock, its monotonic clock, and a sleep (which
# libfaketime broke) before and after its offset file changes.
PROBE = """
import os, pathlib, sys, time
offset_file = pathlib.Path(os.environ["CHAOS_WALL_CLOCK_OFFSET_FILE"])
first = (time.time(), time.monotonic())
time.sleep(0.05)
offset_file.write_text(sys.argv[1])
deadline = time.monotonic() + 5
while abs(time.time() - time.monotonic() - (first[0] - first[1])) < 1000:
    assert time.monotonic() < deadline, "the new offset was never read"
    time.sleep(0.005)
print(first[0] - first[1], time.time() - time.monotonic())
"""


def test_the_preloaded_library_steps_the_wall_clock_and_leaves_monotonic_time_and_sleeps_alone(
    tmp_path,
) -> None:
    library = clock.build_library(tmp_path)
    offset_file = tmp_path / "clock-1"
    offset_file.write_text("+3600\n")
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, "-1800.5\n"],
        env={**os.environ, "LD_PRELOAD": str(library),
             clock.OFFSET_FILE_VARIABLE: str(offset_file)},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    before, after = (float(value) for value in probe.stdout.split())
    real = time.time() - time.monotonic()  # (monotonic time is the same in both processes)
    assert before - real == pytest.approx(3600, abs=1)
    assert after - real == pytest.approx(-1800.5, abs=1)
