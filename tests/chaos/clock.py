"""Wall-clock jumps: a node's clock stepped forward or back (as NTP or an operator steps it), with
libfaketime (Debian's `faketime`). Every node's process preloads the library and reads its
offset from a file of its own (`clock-<node id>` in the run's directory), re-read at every call
(FAKETIME_NO_CACHE), which the nemesis rewrites: "+0", then e.g. "+5400" or "-1800" (seconds).
CLOCK_MONOTONIC is left alone (FAKETIME_DONT_FAKE_MONOTONIC), as a real step leaves it.

What must hold while a clock is off, besides the checker's promises: no partition changes leader
or loses an ISR member and the metadata quorum keeps its leader (broker sessions,
replica.lag.time.max.ms and the raft timeouts run on monotonic time). The nemesis polls the
cluster through the jump and for a while after the clock is set back, and records every change
it sees as a `disturbance` for the checker.
"""

from __future__ import annotations

import math
import os
import random
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
SETTLE_S = 6.0  # watched after the clock is set back (past broker.session.timeout.ms)
POLL_S = 0.5
LIBRARY_PATTERNS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def libfaketime() -> Path | None:
    for pattern in LIBRARY_PATTERNS:
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        if found:
            return found[0]
    return None


def require_libfaketime() -> Path:
    library = libfaketime()
    if library is None:
        pytest.skip(
            "wall-clock jumps need libfaketime (Debian package faketime: scripts/setup.sh), "
            f"not found at {' or '.join(LIBRARY_PATTERNS)}"
        )
    return library


def draw_offsets(rng: random.Random, count: int) -> tuple[int, ...]:
    """`count` jumps in seconds, forward or back, log-uniform between 30 s and 2 h."""
    low, high = math.log(SMALLEST_JUMP_S), math.log(LARGEST_JUMP_S)
    return tuple(
        rng.choice((-1, 1)) * round(math.exp(rng.uniform(low, high))) for _ in range(count)
    )


class WallClocks:
    """Each node's wall-clock offset, as the file its libfaketime reads."""

    def __init__(self, cluster: Cluster, directory: Path, library: Path) -> None:
        self.files = {node_id: directory / f"clock-{node_id}" for node_id in cluster.nodes}
        self.offsets: dict[int, int] = {}
        for node_id, node in cluster.nodes.items():
            self.set(node_id, 0)
            node.environment.update(
                LD_PRELOAD=str(library),
                FAKETIME_TIMESTAMP_FILE=str(self.files[node_id]),
                FAKETIME_NO_CACHE="1",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
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
    assert clocks is not None, f"{step.fault} needs the nodes started under libfaketime"
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
