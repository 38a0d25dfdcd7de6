"""Operations under load: what an operator does to a running cluster, done while the workloads
run, each step recorded in the history as a fault (so the checker measures the unavailability
it costs) — a rolling restart (SIGTERM, controlled shutdown, of every node in turn), a topic
deleted and recreated while a producer writes to it, a partition reassignment to a fourth node
and back (`moldau cluster reassign`), a controller voter removed and added back (KIP-853,
`moldau cluster remove-controller | add-controller`).

The runner (runner.py) calls `perform` for a step whose fault is one of `OPERATIONS`, then waits
for `faults.healed` as after any fault.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.client.config import ClientConfig
from moldau.client.quorum import describe_controllers
from tests.integration.cluster import ClusterNode

from .faults import Nodes, active_controller, healed, partition_states, wait_until
from .history import OK, History
from .workloads import CLIENT_LOGS, ProducerWorkload, Workload

ROLLING_RESTART = "rolling-restart"
DELETE_TOPIC = "delete-topic"
REASSIGN = "reassign"
VOTERS = "voters"

DOOMED = "doomed"  # the topic deleted and recreated under its producer
DELETIONS = 3  # deletions (each followed by the recreation) in one delete-topic step
ABSENCE_S = (1.0, 4.0)  # how long the topic stays deleted, as the seed picks
HEAL_TIMEOUT_S = 90.0
COMMAND_TIMEOUT_S = 120.0


@dataclass(slots=True, kw_only=True)
class Stage:
    """What an operation acts on and may add to: a topic whose final log the run must read
    (`topics`), a client the run must stop (`workloads`)."""

    nodes: Nodes
    history: History
    topics: list[str]
    workloads: list[Workload]
    target: float  # the seed's choice (which node or partition), a fraction of the choices
    partitions: int


def perform(fault: str, stage: Stage) -> None:
    OPERATIONS[fault](stage)


def _healed(stage: Stage, what: str) -> None:
    wait_until(lambda: healed(stage.nodes, stage.topics), timeout_s=HEAL_TIMEOUT_S, what=what)


def rolling_restart(stage: Stage) -> None:
    """Every node in turn (from the one the seed picks): SIGTERM, a clean exit, started again,
    and the cluster healed before the next."""
    node_ids = sorted(stage.nodes.cluster.nodes)
    first = int(stage.target * len(node_ids))
    for node_id in node_ids[first:] + node_ids[:first]:
        start = stage.history.now()
        try:
            stage.nodes.cluster.stop(node_id)  # a clean exit within its deadline, or it fails
        except pytest.fail.Exception as error:  # (a BaseException: the run must go on)
            raise RuntimeError(f"node {node_id} did not stop cleanly: {error}") from None
        stage.history.record(
            "fault", fault=ROLLING_RESTART, nodes=[node_id], phase="start", start=start
        )
        start = stage.history.now()
        stage.nodes.cluster.launch([node_id])
        stage.history.record(
            "fault", fault=ROLLING_RESTART, nodes=[node_id], phase="stop", start=start
        )
        _healed(stage, f"healing after restarting node {node_id}")


def delete_topic(stage: Stage) -> None:
    """A further producer writes to `doomed` (3 partitions, RF 3); the topic is deleted, gone
    from every broker's metadata, created again under the same name, and written to again;
    `DELETIONS` times, each time absent for 1-4 s. The history's `topic` entries tell the
    checker which incarnation each record was acknowledged by. The topic and its producer are
    made by the run's first such step and kept by the next."""
    bootstrap = stage.nodes.bootstrap()
    if DOOMED not in stage.topics:  # the run's first delete-topic step; later ones find both
        _create(stage, bootstrap)
        producer = ProducerWorkload(
            "d1", stage.history, bootstrap, topic=DOOMED, partitions=stage.partitions
        )
        producer.start()
        stage.workloads.append(producer)
        stage.topics.append(DOOMED)
    _acknowledged_on(stage, DOOMED, 50, what="records acknowledged on the first doomed topic")
    for _ in range(DELETIONS):
        start = stage.history.now()
        stage.history.record("fault", fault=DELETE_TOPIC, nodes=[], phase="start", start=start)
        admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_LOGS})
        admin.delete_topics([DOOMED], operation_timeout=30)[DOOMED].result(60)
        stage.history.record("topic", topic=DOOMED, action="deleted", start=start)
        wait_until(
            lambda: all(_gone(node.bootstrap) for node in stage.nodes.cluster.brokers()),
            timeout_s=30,
            what=f"{DOOMED} gone from every broker's metadata",
        )
        # Gone for a while (pacing, not syncing): the producer finds no such topic.
        time.sleep(ABSENCE_S[0] + stage.target * (ABSENCE_S[1] - ABSENCE_S[0]))
        _create(stage, bootstrap)
        start = stage.history.now()
        stage.history.record("fault", fault=DELETE_TOPIC, nodes=[], phase="stop", start=start)
        _healed(stage, f"{DOOMED} recreated with 3 in-sync replicas")
        _acknowledged_on(stage, DOOMED, 50, what=f"records acknowledged on the recreated {DOOMED}")


def _create(stage: Stage, bootstrap: str) -> None:
    start = stage.history.now()
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_LOGS})
    topic = NewTopic(DOOMED, stage.partitions, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=30)[DOOMED].result(60)
    stage.history.record("topic", topic=DOOMED, action="created", start=start)


def _gone(bootstrap: str) -> bool:
    metadata = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_LOGS}).list_topics(timeout=5)
    return DOOMED not in metadata.topics or metadata.topics[DOOMED].error is not None


def _acknowledged_on(stage: Stage, topic: str, count: int, *, what: str) -> None:
    """Until `count` records sent to `topic` from now on are acknowledged."""
    since = stage.history.now()

    def acknowledged() -> int:
        return sum(
            1
            for op in list(stage.history.operations)
            if op["f"] == "send"
            and op["topic"] == topic
            and op["outcome"] == OK
            and op["start"] >= since
        )

    wait_until(lambda: acknowledged() >= count, timeout_s=HEAL_TIMEOUT_S, what=what)


def reassign(stage: Stage) -> None:
    """Move one partition of each topic (the seed picks which, and which replica leaves) from
    its replicas to a set that takes in the broker outside them, then back, each with
    `moldau cluster reassign execute`, polled with `verify` until complete."""
    bootstrap = stage.nodes.bootstrap()
    brokers = sorted(node.node_id for node in stage.nodes.cluster.brokers())
    partition = int(stage.target * stage.partitions)
    states = [s for s in partition_states(bootstrap, stage.topics) if s.partition == partition]
    moves = []  # (topic, replicas there, replicas now)
    for state in states:
        outside = [b for b in brokers if b not in state.replicas]
        assert outside, f"{state.topic}-{partition} is on every broker: nowhere to move it"
        leaving = state.replicas[int(stage.target * 997) % len(state.replicas)]
        there = [outside[0] if r == leaving else r for r in state.replicas]
        moves.append((state.topic, there, list(state.replicas)))
    for direction in ("there", "back"):
        placed = [(topic, there if direction == "there" else now) for topic, there, now in moves]
        plan = {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": partition, "replicas": replicas}
                for topic, replicas in placed
            ],
        }
        start = stage.history.now()
        nodes = sorted({b for _, replicas in placed for b in replicas})
        stage.history.record(
            "fault", fault=REASSIGN, nodes=nodes, phase="start", start=start,
            partition=[stage.topics[0], partition], plan=plan["partitions"],
        )  # fmt: skip
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
            json.dump(plan, file)
        path = file.name
        _moldau("cluster", "reassign", "execute", "-b", bootstrap,
                "--reassignment-json-file", path, what=f"reassignment {direction} started")  # fmt: skip
        wait_until(
            lambda path=path: _verified(bootstrap, path),
            timeout_s=HEAL_TIMEOUT_S,
            what=f"reassignment {direction} complete ({plan['partitions']})",
        )
        Path(path).unlink()
        start = stage.history.now()
        stage.history.record("fault", fault=REASSIGN, nodes=nodes, phase="stop", start=start)
        _healed(stage, f"healing after the reassignment {direction}")


def _verified(bootstrap: str, path: str) -> bool:
    result = _run_moldau(
        "cluster", "reassign", "verify", "-b", bootstrap, "--reassignment-json-file", path
    )
    if result.returncode not in (0, 4):  # 4: still in progress
        raise RuntimeError(f"reassign verify: {result.stdout}{result.stderr}")
    return result.returncode == 0


def voters(stage: Stage) -> None:
    """The static quorum upgraded to dynamic voters (kraft.version 1), then one voter (the
    active controller or another, as the seed picks) removed and added back once it has
    caught up as an observer."""
    controllers = [n for n in stage.nodes.cluster.nodes.values() if n.controller_port]
    quorum = ",".join(f"{n.host}:{n.controller_port}" for n in controllers)
    _retried(
        "feature", "upgrade", "--bootstrap-controller", quorum, "--feature", "kraft.version=1",
        what="the kraft.version upgrade taken",
    )  # fmt: skip
    leader = active_controller(stage.nodes)
    others = sorted(n.node_id for n in controllers if n.node_id != leader)
    chosen = leader if stage.target < 0.5 else others[int(stage.target * 997) % len(others)]
    node = stage.nodes.cluster.nodes[chosen]
    directory_id = _directory_id(node)
    start = stage.history.now()
    stage.history.record("fault", fault=VOTERS, nodes=[chosen], phase="start", start=start,
                         leader=leader)  # fmt: skip
    _retried(
        "cluster", "remove-controller", "--bootstrap-controller", quorum,
        "--controller-id", str(chosen), "--controller-directory-id", directory_id,
        what=f"controller {chosen} removed",
    )  # fmt: skip
    wait_until(
        lambda: chosen not in _voter_ids(quorum),
        timeout_s=30,
        what=f"controller {chosen} no longer a voter",
    )
    options = [x for key, value in node.overrides.items() for x in ("--override", f"{key}={value}")]
    _retried(
        "cluster", "add-controller", "--bootstrap-controller", quorum, *options,
        what=f"controller {chosen} added back once caught up",
    )  # fmt: skip
    wait_until(
        lambda: _voter_ids(quorum) == sorted(n.node_id for n in controllers),
        timeout_s=30,
        what="every controller a voter again",
    )
    start = stage.history.now()
    stage.history.record("fault", fault=VOTERS, nodes=[chosen], phase="stop", start=start)


def _directory_id(node: ClusterNode) -> str:
    text = (node.data_dir / "meta.properties").read_text()
    [line] = [x for x in text.splitlines() if x.startswith("directory.id=")]
    return line.split("=", 1)[1]


def _voter_ids(quorum: str) -> list[int]:
    """The quorum's voters, as its leader describes them (DescribeQuorum, KIP-919)."""

    async def ask() -> list[int]:
        described = await describe_controllers(ClientConfig({}), quorum)
        return sorted(voter.replica_id for voter in described.quorum.voters)

    return asyncio.run(ask())


def _run_moldau(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moldau", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def _moldau(*arguments: str, what: str) -> str:
    result = _run_moldau(*arguments)
    if result.returncode != 0:
        raise RuntimeError(f"{what}: moldau {' '.join(arguments)}: {result.stdout}{result.stderr}")
    return result.stdout


def _retried(*arguments: str, what: str) -> None:
    """A `moldau` command until it succeeds (the quorum's leader refuses while it cannot)."""

    def attempt() -> bool:
        _moldau(*arguments, what=what)
        return True

    wait_until(attempt, timeout_s=60, what=what)


def tracebacks(directory: Path) -> list[str]:
    """A problem for each node log under `directory` that holds a Python traceback."""
    found = []
    for log in sorted(directory.glob("*/server.log")):
        text = log.read_text(errors="replace")
        at = text.find("Traceback")
        if at >= 0:
            found.append(f"{log} logs a traceback:\n{text[at : at + 3000]}")
    return found


OPERATIONS: dict[str, Callable[[Stage], None]] = {
    ROLLING_RESTART: rolling_restart,
    DELETE_TOPIC: delete_topic,
    REASSIGN: reassign,
    VOTERS: voters,
}
