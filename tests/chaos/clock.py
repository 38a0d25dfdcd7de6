"""Wall-clock jumps: a node's clock stepped forward or back (as NTP or an operator steps it). Every
node's process preloads `wall_clock_offset.c`, built here into the run's directory, which adds the
offset read from a file of its own (`clock-<node id>`, re-read every 10 ms) to the wall clock
(clock_gettime's CLOCK_REALTIME, gettimeofday, time) and leaves every other clock and every wait
alone, as a real step does. The nemesis rewrites the file: "+0", then e.g. "+5400" or "-1800"
(seconds).

What must hold while a clock is off, besides the checker's promises: no partition changes leader
or loses an ISR member and the metadata quorum keeps its leader (broker sessions,
replica.lag.time.max.ms and the raft timeouts run on monotonic time). The nemesis polls the
cluster through the jump and for a while after the clock is set back, and records every change
it sees as a `disturbance` for the checker. These runs give those timeouts 10 s (`TIMEOUTS`)
instead of the 2-4 s of the other scenarios: a timeout that read the wall clock still trips at a
step of 30 s or more, while a node starved of CPU for 2 s on a loaded machine (what made the
first clock runs elect spuriously, RELIABILITY.md) does not.

Not libfaketime: with its offset file re-read at every call it costs four system calls and about
6 µs of CPU per wall-clock reading (a node reads the wall clock 10-17 thousand times a second
here), and it wraps the waits too (sleeps, condition variables, poll, epoll): under
FAKETIME_DONT_FAKE_MONOTONIC Python's `time.sleep` fails with EINVAL in it even at offset +0.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.cluster import Cluster

from .faults import Nodes, active_controller
from .history import History
from .workloads import CLIENT_LOGS

CLOCK_JUMP = "clock-jump"  # one node's clock (a leader, a follower or the active controller)
CLOCK_JUMP_ALL = "clock-jump-all"  # every node's clock, each by an amount of its own
CLOCK_FAULTS = (CLOCK_JUMP, CLOCK_JUMP_ALL)
SMALLEST_JUMP_S = 30
LARGEST_JUMP_S = 2 * 3600  # far below the default retention (7 days) and producer-id expiry (1 day)
TIMEOUTS = {
    "broker.session.timeout.ms": "10000",
    "replica.lag.time.max.ms": "10000",
    "controller.quorum.fetch.timeout.ms": "10000",
}
SETTLE_S = 12.0  # watched after the clock is set back (past the TIMEOUTS)
POLL_S = 0.5
LIBRARY_SOURCE = Path(__file__).with_name("wall_clock_offset.c")
OFFSET_FILE_VARIABLE = "CHAOS_WALL_CLOCK_OFFSET_FILE"  # (not MOLDAU_: those configure the node)
COMPILERS = ("cc", "gcc", "clang")


def build_library(directory: Path) -> Path:
    """`wall_clock_offset.c` compiled into `directory`; skips the test, saying why, where no C
    compiler is found (a build that fails is a failure)."""
    compiler = next((found for name in COMPILERS if (found := shutil.which(name))), None)
    if compiler is None:
        pytest.skip(
            f"wall-clock jumps need a C compiler ({', '.join(COMPILERS)}) to build "
            f"{LIBRARY_SOURCE.name}, the library preloaded into each node to offset its clock"
        )
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / "wall-clock-offset.so"
    command = [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(LIBRARY_SOURCE), "-ldl"]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.fail(f"building {LIBRARY_SOURCE.name} failed ({' '.join(command)}):\n{built.stderr}")
    return library


def draw_offsets(rng: random.Random, count: int) -> tuple[int, ...]:
    """`count` jumps in seconds, forward or back, log-uniform between 30 s and 2 h."""
    low, high = math.log(SMALLEST_JUMP_S), math.log(LARGEST_JUMP_S)
    return tuple(
        rng.choice((-1, 1)) * round(math.exp(rng.uniform(low, high))) for _ in range(count)
    )


class WallClocks:
    """Each node's wall-clock offset, as the file its preloaded library reads."""

    def __init__(self, cluster: Cluster, directory: Path, library: Path) -> None:
        self.files = {node_id: directory / f"clock-{node_id}" for node_id in cluster.nodes}
        self.offsets: dict[int, int] = {}
        for node_id, node in cluster.nodes.items():
            self.set(node_id, 0)
            node.environment.update(
                LD_PRELOAD=str(library), **{OFFSET_FILE_VARIABLE: str(self.files[node_id])}
            )

    def set(self, node_id: int, offset_s: int) -> None:
        """The node's wall clock `offset_s` from the real one from its next reading on."""
        path = self.files[node_id]
        staged = path.with_suffix(".next")
        staged.write_text(f"{offset_s:+d}\n")
        os.replace(staged, path)  # (never a half-written file to a reading process)
        self.offsets[node_id] = offset_s

    def reset(self) -> None:
        for node_id in self.files:
            self.set(node_id, 0)


def aim(target: float, leader: int, followers: list[int], controller: int) -> int:
    """The seed's choice for a single jump: the partition's leader, a follower of it, or the
    active controller."""
    pick = int(target * 997) % 3
    if pick == 0:
        return leader
    if pick == 1:
        return followers[int(target * 991) % len(followers)]
    return controller


class Watch:
    """The cluster's leaders, ISRs and quorum leader when a jump begins, and every change to
    them seen since (polled; a change that comes and goes within a poll may be missed)."""

    def __init__(self, nodes: Nodes, topics: list[str]) -> None:
        self.nodes = nodes
        self.topics = topics
        self.baseline = self._state()
        self.changes: list[str] = []

    def _state(self) -> dict[str, Any]:
        bootstrap = self.nodes.bootstrap()
        metadata = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_LOGS}).list_topics(
            timeout=5
        )
        state: dict[str, Any] = {"quorum leader": active_controller(self.nodes)}
        for topic, described in metadata.topics.items():
            if topic.startswith("__cluster") or described.error is not None:
                continue
            for partition in described.partitions.values():
                state[f"{topic}-{partition.id} leader"] = partition.leader
                state[f"{topic}-{partition.id} isr"] = tuple(sorted(partition.isrs))
        return state

    def hold(self, seconds: float) -> None:
        """Poll for `seconds` (the jump's hold, or the settling after it)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                state = self._state()
            except Exception:  # a slow answer is no change: ask again
                state = {}
            for key, before in self.baseline.items():
                now = state.get(key, before)
                change = f"{key} {before} -> {now}"
                if now != before and change not in self.changes:
                    self.changes.append(change)
            time.sleep(POLL_S)  # polling pace, not synchronisation


def jump_and_watch(
    step: Any, targets: list[int], nodes: Nodes, history: History, topics: list[str], **fault: Any
) -> None:
    """Step the targets' clocks by `step.offsets_s`, hold, set them back, watch a while longer;
    the fault's start and stop and every change seen go to the history."""
    clocks = nodes.clocks
    assert clocks is not None, f"{step.fault} needs the nodes started with their clock files"
    watch = Watch(nodes, topics)
    start = history.now()
    offsets = dict(zip(targets, step.offsets_s, strict=False))
    for node_id, offset_s in offsets.items():
        clocks.set(node_id, offset_s)
    history.record(
        "fault", fault=step.fault, nodes=targets, phase="start", start=start,
        offsets_s=[offsets[n] for n in targets], **fault,
    )  # fmt: skip
    watch.hold(step.hold_s)
    start = history.now()
    clocks.reset()
    history.record("fault", fault=step.fault, nodes=targets, phase="stop", start=start)
    watch.hold(SETTLE_S)
    for change in watch.changes:
        history.record("disturbance", fault=step.fault, nodes=targets, change=change)
