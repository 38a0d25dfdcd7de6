"""One chaos run: a 3-node cluster (combined broker+controller nodes), the workloads, a seeded
schedule of process or network faults, healing, the final logs read back, the checker.

A scenario names the faults it draws from; a seed fixes the schedule (which fault, aimed at which
partition's leader or follower, held how long, how far apart), so a failing seed replays the same
schedule (node ids are resolved at run time: who leads depends on the cluster).
"""

from __future__ import annotations

import hashlib
import random
import shutil
import struct
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import BROKER, COMBINED, Cluster, build_cluster
from tests.integration.conftest import ServerFactory, _server_factory
from tests.integration.netns import Network

from . import checker, clock, disk, other_clients
from . import operations as under_load
from .disk import DISK_EIO, DISK_FAULTS, DISK_FULL, TORN_TAIL
from .faults import Nodes, active_controller, healed, partition_states, wait_until
from .history import OK, History, Operation, read_history
from .workloads import CLIENT_LOGS, GroupConsumer, ProducerWorkload, TransformJob, Workload

SESSION_TIMEOUT_MS = 4000
REPLICA_LAG_MS = 2000
SETTINGS = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    # Every topic is created by the run (3 partitions, RF 3): a producer's metadata request must
    # not create a deleted one again with the defaults (1 partition, RF 1) under its feet.
    "auto.create.topics.enable": "false",
}
PARTITIONS = 3
SOURCE = "acked"  # idempotent producers write here
SINK = "transformed"  # the transactional job writes here
HEAL_TIMEOUT_S = 90.0
# The job commits within this of healing (time to give up a producer stuck in librdkafka,
# twice OFFSETS_TIMEOUT_S, and start over included).
PROGRESS_TIMEOUT_S = 90.0

KILL_LEADER = "kill-leader"
KILL_FOLLOWER = "kill-follower"
KILL_CONTROLLER = "kill-controller"
KILL_CONTROLLER_AND_BROKER = "kill-controller-and-broker"
KILL_ALL = "kill-all"
PAUSE_LEADER = "pause-leader"  # longer than broker.session.timeout.ms
PAUSE_FOLLOWER = "pause-follower"  # longer than replica.lag.time.max.ms, shorter than the session
# Network faults (each node in its namespace, tests/integration/netns.py), all held longer than
# broker.session.timeout.ms (and so the quorum's fetch timeout, 2 s); clients reach every node.
PARTITION_LEADER = "partition-leader"  # a partition leader cut from the other nodes
PARTITION_CONTROLLER = "partition-controller"  # the active controller cut from the other nodes
ONE_WAY = "one-way"  # a leader's packets to the others dropped, or theirs to it
BRIDGE = "bridge"  # a leader and one other node cut apart; the third node talks to both
SLOW_LINK = "slow-link"  # a leader's links to the others rate-capped, a short queue (no cut)
NETWORK_FAULTS = (PARTITION_LEADER, PARTITION_CONTROLLER, ONE_WAY, BRIDGE, SLOW_LINK)
SLOW_RATES_KBIT = (32, 256)  # the cap, as the seed picks (log-uniform)
SLOW_QUEUES_MS = (500, 2000)  # what the capped link's queue holds; more is dropped
FAULT_KINDS = (
    KILL_LEADER,
    KILL_FOLLOWER,
    KILL_CONTROLLER,
    KILL_CONTROLLER_AND_BROKER,
    KILL_ALL,
    PAUSE_LEADER,
    PAUSE_FOLLOWER,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    name: str
    faults: tuple[str, ...]  # drawn from, one per step
    steps: int = 2
    acks: str = "all"
    transactions: bool = True  # run the consume-transform-produce job and a consumer group
    rate: float = 150.0  # records a second from each producer
    producers: int = 1
    tolerate: tuple[str, ...] = ()  # anomaly kinds the scenario's promise allows
    brokers: int = 0  # broker-only nodes beyond the three combined ones
    # an idempotent producer of each of these client libraries besides confluent-kafka's
    other_clients: tuple[str, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)  # over SETTINGS, for every node

    @property
    def node_settings(self) -> dict[str, str]:
        return {**SETTINGS, **self.settings}

    @property
    def needs_network(self) -> bool:
        return any(fault in NETWORK_FAULTS for fault in self.faults)

    @property
    def needs_disks(self) -> bool:
        """Each node's data on a tmpfs of its own (disk-full fills it)."""
        return DISK_FULL in self.faults

    @property
    def needs_clock(self) -> bool:
        return any(fault in clock.CLOCK_FAULTS for fault in self.faults)


SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        Scenario(name=KILL_LEADER, faults=(KILL_LEADER,)),
        Scenario(name=KILL_FOLLOWER, faults=(KILL_FOLLOWER,)),
        Scenario(name=KILL_CONTROLLER, faults=(KILL_CONTROLLER,)),
        Scenario(name=KILL_CONTROLLER_AND_BROKER, faults=(KILL_CONTROLLER_AND_BROKER,)),
        Scenario(name=KILL_ALL, faults=(KILL_ALL,), steps=1),
        Scenario(name=PAUSE_LEADER, faults=(PAUSE_LEADER,)),
        Scenario(name=PAUSE_FOLLOWER, faults=(PAUSE_FOLLOWER,)),
        Scenario(name="mixed", faults=FAULT_KINDS, steps=4),
        # the same with aiokafka's and kafka-python's idempotent producers writing alongside
        Scenario(
            name="mixed-clients",
            faults=FAULT_KINDS,
            steps=4,
            other_clients=(other_clients.AIOKAFKA, other_clients.KAFKA_PYTHON),
        ),
        Scenario(name=PARTITION_LEADER, faults=(PARTITION_LEADER,)),
        Scenario(name=PARTITION_CONTROLLER, faults=(PARTITION_CONTROLLER,)),
        Scenario(name=ONE_WAY, faults=(ONE_WAY,)),
        Scenario(name=BRIDGE, faults=(BRIDGE,)),
        Scenario(name=SLOW_LINK, faults=(SLOW_LINK,)),
        Scenario(name=TORN_TAIL, faults=(TORN_TAIL,)),
        Scenario(name=DISK_FULL, faults=(DISK_FULL,)),
        Scenario(name=DISK_EIO, faults=(DISK_EIO,)),
        # Wall-clock jumps (tests/chaos/clock.py), each held 5-7 s, then set back; the timeouts
        # the nemesis watches are 10 s there (clock.TIMEOUTS), not the 2-4 s of the others.
        Scenario(name=clock.CLOCK_JUMP, faults=(clock.CLOCK_JUMP,), settings=clock.TIMEOUTS),
        Scenario(
            name=clock.CLOCK_JUMP_ALL, faults=(clock.CLOCK_JUMP_ALL,), settings=clock.TIMEOUTS
        ),
        # Operations under load (operations.py): one step each, however long it takes.
        Scenario(name=under_load.ROLLING_RESTART, faults=(under_load.ROLLING_RESTART,), steps=1),
        Scenario(name=under_load.DELETE_TOPIC, faults=(under_load.DELETE_TOPIC,), steps=1),
        Scenario(name=under_load.REASSIGN, faults=(under_load.REASSIGN,), steps=1, brokers=1),
        Scenario(name=under_load.VOTERS, faults=(under_load.VOTERS,), steps=2),
        # acks=1 promises nothing about a leader's crash: loss is reported, not failed on; it
        # still promises no duplicates (no idempotence, so retries may duplicate: reported too).
        Scenario(
            name="kill-leader-acks1",
            faults=(KILL_LEADER, PAUSE_LEADER),
            acks="1",
            transactions=False,
            tolerate=(checker.LOST, checker.DUPLICATED, checker.OFFSET_MISMATCH),
        ),
    )
}


@dataclass(slots=True)
class Step:
    fault: str
    target: float  # which partition (or node) to aim at, as a fraction of the choices
    hold_s: float
    gap_s: float  # healthy time before the fault
    offsets_s: tuple[int, ...] = ()  # a clock fault's jump of each target's wall clock

    def as_dict(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "target": round(self.target, 3),
            "hold_s": self.hold_s,
            "gap_s": self.gap_s,
            **({"offsets_s": list(self.offsets_s)} if self.offsets_s else {}),
        }


def schedule(scenario: Scenario, seed: int) -> list[Step]:
    rng = random.Random(seed)
    steps = []
    for _ in range(scenario.steps):
        fault = rng.choice(scenario.faults)
        if fault == PAUSE_LEADER or fault in NETWORK_FAULTS or fault in clock.CLOCK_FAULTS:
            hold = SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 3.0)
        elif fault == PAUSE_FOLLOWER:
            hold = REPLICA_LAG_MS / 1000 + rng.uniform(0.5, 1.5)
        elif fault == DISK_FULL:
            hold = rng.uniform(2.0, 6.0)
        else:
            hold = rng.uniform(0.5, 4.0)
        steps.append(
            Step(
                fault=fault,
                target=rng.random(),
                hold_s=round(hold, 2),
                gap_s=round(rng.uniform(1.0, 3.0), 2),
            )
        )
        if fault in clock.CLOCK_FAULTS:
            steps[-1].offsets_s = clock.draw_offsets(rng, 3 if fault == clock.CLOCK_JUMP_ALL else 1)
    return steps


@dataclass(slots=True)
class RunResult:
    scenario: str
    seed: int
    report: checker.Report
    history: list[Operation]
    history_path: Path
    duration_s: float
    faults: int
    problems: list[str] = field(default_factory=list)  # liveness: never healed, a client died

    @property
    def valid(self) -> bool:
        return self.report.valid and not self.problems

    def describe(self) -> str:
        text = checker.describe_violation(self.history, self.report)
        if self.problems:
            text += "\nproblems:\n" + "\n".join(f"  {problem}" for problem in self.problems)
        return text + f"\nhistory: {self.history_path}"


def run(scenario: Scenario, seed: int, directory: Path) -> RunResult:
    """One run in `directory`: the history, each node's data and log (server-N/server.log).
    A scenario with network faults runs each node in a namespace of its own, torn down after
    the nodes stop."""
    directory.mkdir(parents=True, exist_ok=True)
    clock_library = clock.build_library(directory) if scenario.needs_clock else None
    with ExitStack() as network_scope:
        network = None
        if scenario.needs_network:
            network = network_scope.enter_context(Network(range(1, 4)))
        if scenario.needs_disks:  # (left after the servers stopped: they stop first)
            network_scope.enter_context(disk.node_disks(directory, [1, 2, 3]))
        servers = _server_factory(directory)
        try:
            return _run(scenario, seed, next(servers), directory, network, clock_library)
        finally:
            servers.close()  # stops by PID every node still running, requiring clean exits


def _run(
    scenario: Scenario,
    seed: int,
    start_server: ServerFactory,
    directory: Path,
    network: Network | None,
    clock_library: Path | None,
) -> RunResult:
    steps = schedule(scenario, seed)
    history_path = directory / "history.jsonl"
    began = time.monotonic()
    problems: list[str] = []
    with History(history_path) as history:
        history.record(
            "meta", seed=seed, scenario=scenario.name, schedule=[s.as_dict() for s in steps],
            settings={**scenario.node_settings, "acks": scenario.acks, "min.insync.replicas": "2"},
        )  # fmt: skip
        cluster = build_cluster(
            start_server,
            directory,
            roles=[COMBINED] * 3 + [BROKER] * scenario.brokers,
            extra=scenario.node_settings,
            network=network,
            launch=False,
        )
        if DISK_EIO in scenario.faults:
            disk.inject_faults(cluster)
        nodes = Nodes(cluster, network)
        if clock_library is not None:
            nodes.clocks = clock.WallClocks(cluster, directory, clock_library)
        cluster.launch()
        workloads: list[Workload] = []
        try:
            topics = _create_topics(cluster, scenario)
            workloads = _start_workloads(scenario, history, cluster)
            _wait_for_acknowledgements(history, 100)
            for step in steps:
                time.sleep(step.gap_s)  # healthy traffic between faults (pacing, not syncing)
                if step.fault in under_load.OPERATIONS:
                    under_load.perform(
                        step.fault,
                        under_load.Stage(nodes=nodes, history=history, topics=topics,
                                         workloads=workloads,
                                         target=step.target, partitions=PARTITIONS),
                    )  # fmt: skip
                else:
                    _inject(step, nodes, history, topics)
                try:
                    wait_until(
                        lambda: healed(nodes, topics), timeout_s=HEAL_TIMEOUT_S,
                        what=f"healing after {step.fault}",
                    )  # fmt: skip
                except TimeoutError as error:
                    problems.append(str(error))
                    break
            _wait_for_acknowledgements(history, 100)
            if scenario.transactions:
                _wait_for_progress(history, problems, workloads, nodes.bootstrap())
            for workload in workloads:
                patience = 90
                workload.stop(patience)
                if workload.is_alive():
                    problems.append(
                        f"client {workload.name} did not stop within {patience} s; it is at:\n"
                        + _stack_of(workload)
                    )
                if workload.crash is not None:
                    problems.append(f"client {workload.name} died: {workload.crash!r}")
            _read_final_logs(cluster, history, topics, problems)
        except Exception as error:  # the run could not finish: what it saw is still checked
            problems.append(f"run stopped: {error!r}")
        finally:
            for workload in workloads:
                workload.stopping.set()
            for node_id in sorted(nodes.paused):
                nodes.resume(node_id)
            if network is not None:
                network.heal()
            try:
                cluster.stop_all()
            except (Exception, pytest.fail.Exception) as error:  # kept beside what stopped the run
                problems.append(f"stopping the nodes: {error!s:.3000}")
    if any(fault in under_load.OPERATIONS for fault in scenario.faults):
        problems.extend(under_load.tracebacks(directory))  # the nodes' logs, complete now
    operations = read_history(history_path)
    report = checker.check(operations, tolerate=scenario.tolerate)
    return RunResult(
        scenario=scenario.name,
        seed=seed,
        report=report,
        history=operations,
        history_path=history_path,
        duration_s=round(time.monotonic() - began, 1),
        faults=sum(1 for op in operations if op["f"] == "fault" and op.get("phase") == "start"),
        problems=problems,
    )


def _create_topics(cluster: Cluster, scenario: Scenario) -> list[str]:
    topics = [SOURCE, SINK] if scenario.transactions else [SOURCE]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **CLIENT_LOGS})
    futures = admin.create_topics(
        [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in topics]
    )
    for future in futures.values():
        future.result(30)
    nodes = Nodes(cluster)
    wait_until(lambda: healed(nodes, topics), timeout_s=30, what="topics with 3 in-sync replicas")
    return topics


def _start_workloads(scenario: Scenario, history: History, cluster: Cluster) -> list[Workload]:
    bootstrap = cluster.bootstrap
    workloads: list[Workload] = [
        ProducerWorkload(
            f"p{index}",
            history,
            bootstrap,
            topic=SOURCE,
            partitions=PARTITIONS,
            acks=scenario.acks,
            rate=scenario.rate,
        )
        for index in range(1, scenario.producers + 1)
    ]
    for client in scenario.other_clients:  # a1 (aiokafka), k1 (kafka-python)
        kind = {
            other_clients.AIOKAFKA: other_clients.AiokafkaProducerWorkload,
            other_clients.KAFKA_PYTHON: other_clients.KafkaPythonProducerWorkload,
        }[client]
        workloads.append(
            kind(client[0] + "1", history, bootstrap, topic=SOURCE, partitions=PARTITIONS,
                 rate=scenario.rate)
        )  # fmt: skip
    if scenario.transactions:
        workloads.append(
            TransformJob(
                "job",
                history,
                bootstrap,
                source=SOURCE,
                sink=SINK,
                partitions=PARTITIONS,
                group="transformers",
            )
        )
        workloads.append(GroupConsumer("reader", history, bootstrap, topic=SINK, group="readers"))
    for workload in workloads:
        workload.start()
    return workloads


def _wait_for_acknowledgements(history: History, count: int) -> None:
    """Until `count` more records are acknowledged (the producers are writing through)."""

    def acknowledged() -> int:
        return sum(
            1 for op in list(history.operations) if op["f"] == "send" and op["outcome"] == OK
        )

    target = acknowledged() + count
    wait_until(lambda: acknowledged() >= target, timeout_s=60, what=f"{count} acknowledgements")


def _stack_of(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"


def _wait_for_progress(
    history: History, problems: list[str], workloads: list[Workload], bootstrap: str
) -> None:
    """Liveness after healing: the job commits a transaction and the group commits offsets
    (the job may first give up a producer stuck in librdkafka for 30 s, RELIABILITY.md)."""
    healed_at = history.now()
    for kind, what in (("txn", "a transaction"), ("commit", "a group offset commit")):

        def done(kind: str = kind) -> bool:
            return any(
                op["f"] == kind and op["outcome"] == OK and op["start"] >= healed_at
                for op in list(history.operations)
            )

        try:
            wait_until(
                done, timeout_s=PROGRESS_TIMEOUT_S, what=f"{what} acknowledged after healing"
            )
        except TimeoutError as error:
            stacks = "".join(f"\n{w.name} is at:\n{_stack_of(w)}" for w in workloads)
            problems.append(f"{error}{stacks}\n{_groups_and_ends(bootstrap)}")


def _groups_and_ends(bootstrap: str) -> str:
    """What a stalled pipeline is waiting on, as the cluster tells it: each group's state,
    members and assignments, and each sink partition's high watermark and last stable offset."""
    lines = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_LOGS})
        for name, future in admin.describe_consumer_groups(["readers", "transformers"]).items():
            group = future.result(10)
            lines.append(f"group {name}: {group.state} coordinator {group.coordinator.id}")
            for member in group.members:
                assigned = sorted(
                    (tp.topic, tp.partition) for tp in member.assignment.topic_partitions
                )
                lines.append(f"  member {member.member_id} on {member.host}: {assigned}")
        for partition in range(PARTITIONS):
            tp = TopicPartition(SINK, partition)
            high = _watermark(bootstrap, "read_uncommitted", tp)
            stable = _watermark(bootstrap, "read_committed", tp)
            lines.append(f"{SINK}-{partition}: high watermark {high}, last stable offset {stable}")
    except Exception as error:  # a diagnosis only: say what could not be asked
        lines.append(f"(asking the cluster failed: {error!r})")
    return "\n".join(lines)


def _inject(step: Step, nodes: Nodes, history: History, topics: list[str]) -> None:
    start = history.now()
    states = [s for s in partition_states(nodes.bootstrap(), topics) if s.topic == SOURCE]
    aimed = states[int(step.target * len(states))]
    node_ids = sorted(nodes.cluster.nodes)
    if step.fault in (KILL_LEADER, PAUSE_LEADER, PARTITION_LEADER, ONE_WAY, BRIDGE, SLOW_LINK):
        targets = [aimed.leader]
    elif step.fault in DISK_FAULTS:  # the leader or a follower, as the seed chooses
        ordered = [aimed.leader] + [r for r in aimed.replicas if r != aimed.leader]
        targets = [ordered[int(step.target * 997) % len(ordered)]]
    elif step.fault in (KILL_FOLLOWER, PAUSE_FOLLOWER):
        followers = [r for r in aimed.replicas if r != aimed.leader]
        targets = [followers[int(step.target * 997) % len(followers)]]
    elif step.fault in (KILL_CONTROLLER, PARTITION_CONTROLLER):
        targets = [active_controller(nodes)]
    elif step.fault == clock.CLOCK_JUMP:
        followers = [r for r in aimed.replicas if r != aimed.leader]
        targets = [clock.aim(step.target, aimed.leader, followers, active_controller(nodes))]
    elif step.fault == KILL_CONTROLLER_AND_BROKER:
        controller = active_controller(nodes)
        others = [n for n in node_ids if n != controller]
        broker = aimed.leader if aimed.leader in others else others[int(step.target * 997) % 2]
        targets = [controller, broker]
    else:
        targets = node_ids
    if step.fault in clock.CLOCK_FAULTS:
        partition = [aimed.topic, aimed.partition]
        clock.jump_and_watch(step, targets, nodes, history, topics, partition=partition)
        return
    cuts: list[tuple[int, int]] = []
    details: dict[str, Any] = {}
    if step.fault in NETWORK_FAULTS:
        assert nodes.network is not None, f"{step.fault} needs the nodes in namespaces"
        if step.fault == SLOW_LINK:
            details = _slow(step, nodes.network, targets[0])
        else:
            cuts = _cut(step, nodes.network, targets[0])
    elif step.fault in DISK_FAULTS:
        details = _break_disk(step, nodes, targets[0])
    elif step.fault.startswith("pause"):
        for node_id in targets:
            nodes.pause(node_id)
    else:
        for node_id in targets:
            nodes.kill(node_id)
    history.record(
        "fault", fault=step.fault, nodes=targets, phase="start", start=start,
        partition=[aimed.topic, aimed.partition], cuts=cuts, **details,
    )  # fmt: skip
    time.sleep(step.hold_s)  # the fault lasts this long (pacing, not syncing)
    start = history.now()
    if step.fault == DISK_FULL:
        disk.free(nodes.cluster.nodes[targets[0]].data_dir)
    nodes.heal()
    history.record("fault", fault=step.fault, nodes=targets, phase="stop", start=start)


def _break_disk(step: Step, nodes: Nodes, node_id: int) -> dict[str, Any]:
    """Start the disk fault `step` names on `node_id`; what it did, for the history."""
    data_dir = nodes.cluster.nodes[node_id].data_dir
    if step.fault == TORN_TAIL:
        nodes.kill(node_id)
        torn = disk.tear_tails(data_dir, random.Random(step.target))
        return {"torn": [[name, before, after] for name, before, after in torn]}
    if step.fault == DISK_FULL:
        return {"filled_bytes": disk.fill(data_dir)}
    operation = ("fsync", "write")[int(step.target * 997) % 2]
    disk.fail_storage(nodes.cluster, node_id, operation)
    try:
        code = disk.wait_for_halt(nodes.cluster, node_id)
    finally:
        disk.clear_storage_faults(nodes.cluster, node_id)
    nodes.killed.add(node_id)  # started again at healing
    return {"failing": operation, "exit_code": code}


def _cut(step: Step, network: Network, node_id: int) -> list[tuple[int, int]]:
    """Cut the links `step` names around `node_id`; the cuts as (source, destination) pairs."""
    others = [n for n in network.node_ids if n != node_id]
    pick = int(step.target * 997) % 2  # the seed's choice between two ways of one fault
    if step.fault in (PARTITION_LEADER, PARTITION_CONTROLLER):
        network.isolate(node_id)
    elif step.fault == ONE_WAY:
        for other in others:
            if pick:  # it cannot hear from the others
                network.one_way(other, node_id)
            else:  # it cannot send to them
                network.one_way(node_id, other)
    else:  # BRIDGE: it and one other node cut apart, the third in the middle
        network.bridge([node_id], others[pick], [others[1 - pick]])
    return sorted(network.cuts)


def _slow(step: Step, network: Network, node_id: int) -> dict[str, Any]:
    """Cap `node_id`'s links to the other nodes (both ways, or only what it sends, as the seed
    picks) at a rate with a short queue; what was done, for the history."""
    rng = random.Random(step.target)
    low, high = SLOW_RATES_KBIT
    rate_kbit = int(low * (high / low) ** rng.random())
    queue_ms = rng.randrange(SLOW_QUEUES_MS[0], SLOW_QUEUES_MS[1] + 1, 100)
    others = [n for n in network.node_ids if n != node_id]
    network.slow(node_id, others, rate_kbit=rate_kbit, queue_ms=queue_ms)
    if int(step.target * 997) % 2:
        for other in others:
            network.slow(other, [node_id], rate_kbit=rate_kbit, queue_ms=queue_ms)
    return {"slow_links": sorted(network.slow_links), "rate_kbit": rate_kbit, "queue_ms": queue_ms}


def _read_final_logs(
    cluster: Cluster, history: History, topics: list[str], problems: list[str]
) -> None:
    """After healing: wait until no transaction is open (the last stable offset reaches the
    high watermark), read every partition whole under both isolation levels, and digest each
    replica's batches below the high watermark."""
    bootstrap = cluster.bootstrap
    ends: dict[tuple[str, int], int] = {}

    def stable() -> bool:
        for topic in topics:
            for partition in range(PARTITIONS):
                tp = TopicPartition(topic, partition)
                high = _watermark(bootstrap, "read_uncommitted", tp)
                if _watermark(bootstrap, "read_committed", tp) != high:
                    return False
                ends[(topic, partition)] = high
        return True

    try:
        wait_until(
            stable,
            timeout_s=60,
            what="every transaction ended (last stable offset = high watermark)",
        )
    except TimeoutError as error:
        problems.append(str(error))
    for isolation in ("read_uncommitted", "read_committed"):
        for topic in topics:
            for partition, records in _read_whole(bootstrap, topic, isolation).items():
                history.record(
                    "final", isolation=isolation, topic=topic, partition=partition, records=records
                )
    replicas = {(s.topic, s.partition): s.replicas for s in partition_states(bootstrap, topics)}
    for topic in topics:
        for partition in range(PARTITIONS):
            high = ends.get((topic, partition))
            if high is None:
                continue
            digests: dict[str, str] = {}

            def identical(
                topic: str = topic,
                partition: int = partition,
                high: int = high,
                digests: dict[str, str] = digests,
            ) -> bool:
                digests.clear()
                for node_id in replicas[(topic, partition)]:  # its current replica set
                    node = cluster.nodes[node_id]
                    digests[str(node.node_id)] = _replica_digest(
                        node.data_dir / f"{topic}-{partition}", high
                    )
                return len(set(digests.values())) == 1

            try:
                wait_until(
                    identical, timeout_s=20, what=f"replicas of {topic}-{partition} identical"
                )
            except TimeoutError:
                pass  # the checker reports the divergence with the digests
            history.record(
                "replicas", topic=topic, partition=partition, high_watermark=high, digests=digests
            )


def _watermark(bootstrap: str, isolation: str, tp: TopicPartition) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-watermarks",
         "isolation.level": isolation, **CLIENT_LOGS}
    )  # fmt: skip
    try:
        return int(consumer.get_watermark_offsets(tp, timeout=5)[1])
    finally:
        consumer.close()


def _read_whole(bootstrap: str, topic: str, isolation: str) -> dict[int, list[list[Any]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-final",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **CLIENT_LOGS,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    records: dict[int, list[list[Any]]] = {p: [] for p in range(PARTITIONS)}
    finished: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(finished) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    records[message.partition()].append(
                        [message.offset(), message.value().decode()]
                    )
                elif message.error().code() == -191:  # _PARTITION_EOF
                    finished.add(message.partition())
    finally:
        consumer.close()
    if len(finished) < PARTITIONS:
        raise TimeoutError(f"reading {topic} ({isolation}) whole: partitions {finished} ended")
    return records


def _replica_digest(directory: Path, high_watermark: int) -> str:
    """SHA-256 of the partition's batches with a base offset below the high watermark, as the
    node's segment files hold them."""
    digest = hashlib.sha256()
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 12 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            if length <= 0 or base_offset >= high_watermark:
                break
            digest.update(data[position : position + 12 + length])
            position += 12 + length
    return digest.hexdigest()[:16]


def discard(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
