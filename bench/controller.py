"""The metadata quorum measured against one node, in the same run on this machine: topic
creations per second, controller failover time, and the creation, start-up time and RSS of a
cluster holding many partitions.

    .venv/bin/python bench/controller.py [--topics 200] [--failovers 10] [--partitions 10000]
                                         [--flood 5]

(A mode given 0 is skipped: `--topics 0 --failovers 0 --partitions 0 --flood 5` runs the flood
alone.)

Creations: `--topics` topics created one CreateTopics request at a time (confluent-kafka's admin
client, each waited for) on a single node (replication factor 1) and on three combined nodes
(replication factor 3), then as many again in one request. Prints creations/s of each.

Controller failover (`--failovers K`): on three combined nodes, the active controller (from
DescribeQuorum) is SIGKILLed while topics are being created through the other two; the time
from the signal to the first topic created after it is one failover (the new controller elected,
caught up, active, and its first record committed). The node is restarted and caught up before
the next round. Prints p50 and max.

Partitions (`--partitions N`): topics of 100 partitions up to N on one node, and on three
combined nodes with replication factor 3 (N replicas on every node): the time to create them,
each node's RSS, then every node stopped and started again: the time until every node is ready
and every partition has a leader, and the RSS after it.

Flood (`--flood ROUNDS`): on three combined nodes holding 20 topics of 3 partitions (RF 3), the
flood of tests/integration/test_cluster_control_plane_load.py: 50 connections to the broker
listener of the quorum leader, each pipelining Metadata v12 requests for every topic and never
reading an answer, from a child process. ROUNDS quiet and ROUNDS flooded rounds of 10 s
alternate (2 s of rest after each flood), each starting with DescribeQuorum for the leader. In
each, one CreateTopics of a single-partition RF-3 topic at a time goes through a node that does
not lead the quorum (so it is forwarded to the controller), waited for and timed, then deleted
(untimed: the flood's Metadata costs the same in every round); after each creation the other
such node's DescribeQuorum gives (leader, epoch), to count elections. Prints each round, then
count, p50, p99 and max of the creations of each mode, the flooded/quiet ratios of the rounds'
p50 and p99 (medians over rounds), the leader changes seen and the load average.

Everything shares two cores, so the single-node column run next to it is what to compare with.
"""

from __future__ import annotations

import argparse
import itertools
import math
import multiprocessing
import os
import signal
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event

from _harness import Broker, cpu_seconds, header, load_average, megabytes, percentile, rss_bytes
from cluster import Cluster
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from partitions import Wire

from moldau.client import SyncAdminClient
from moldau.protocol.adapter import encode_request
from moldau.protocol.errors import ErrorCode

PARTITIONS_PER_TOPIC = 100
FLOODERS = 50
ROUND_S = 10.0
SETTLE_S = 2.0  # after a flood, for the leader to finish what it had read before the quiet round
EVERY_TOPIC = {"topics": None, "allow_auto_topic_creation": False}
METADATA_LOG = {
    "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]
}


def _create(admin: AdminClient, topics: list[NewTopic]) -> None:
    for future in admin.create_topics(topics, request_timeout=120).values():
        future.result(180)


def creations(count: int) -> None:
    print(f"\ntopic creations, {count} topics of one partition")
    print("                   | one request each, topics/s | one request for all, topics/s")
    with Broker() as broker:
        single = _creation_rates(broker.bootstrap, count, 1)
    with Cluster() as cluster:
        replicated = _creation_rates(cluster.bootstrap, count, 3)
    print(f"single node (RF 1) | {single[0]:26,.1f} | {single[1]:29,.1f}")
    print(f"3 nodes (RF 3)     | {replicated[0]:26,.1f} | {replicated[1]:29,.1f}")
    print(
        f"ratio              | {replicated[0] / single[0]:26.2f} | {replicated[1] / single[1]:29.2f}"
    )


def _creation_rates(bootstrap: str, count: int, replication: int) -> tuple[float, float]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.perf_counter()
    for index in range(count):
        _create(admin, [NewTopic(f"one-{index}", 1, replication)])
    one_by_one = count / (time.perf_counter() - started)
    started = time.perf_counter()
    _create(admin, [NewTopic(f"all-{index}", 1, replication) for index in range(count)])
    together = count / (time.perf_counter() - started)
    return one_by_one, together


def controller_failovers(count: int) -> None:
    times: list[float] = []
    with Cluster() as cluster:
        for round_number in range(count):
            leader = _quorum(cluster.bootstrap).leader_id
            survivors = ",".join(
                f"127.0.0.1:{port}" for node, (port, _) in cluster.ports.items() if node != leader
            )
            admin = AdminClient({"bootstrap.servers": survivors})
            _create(admin, [NewTopic(f"before-{round_number}", 1, 2)])
            killed_at = time.monotonic()
            cluster.kill(leader)
            attempt = 0
            while True:
                attempt += 1
                try:
                    futures = admin.create_topics(
                        [NewTopic(f"after-{round_number}-{attempt}", 1, 2)], request_timeout=2
                    )
                    next(iter(futures.values())).result(3)
                    break
                except KafkaException:
                    continue
            times.append(time.monotonic() - killed_at)
            print(f"  round {round_number + 1}: controller {leader} killed, "
                  f"a topic created {times[-1]:.2f} s later")  # fmt: skip
            cluster.start(leader)
            cluster.wait_ready(leader)
            _wait_caught_up(cluster.bootstrap)
    print(f"\ncontroller failover (SIGKILL of the active controller -> first topic created "
          f"after it), {count} times: p50 {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s")  # fmt: skip


def _quorum(bootstrap: str):  # type: ignore[no-untyped-def]
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_quorum()


def _wait_caught_up(bootstrap: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            quorum = _quorum(bootstrap)
            if quorum.leader_id >= 0 and all(v.lag <= 10 for v in quorum.voters):
                return
        except Exception:  # a node still starting
            pass
        time.sleep(0.2)
    raise RuntimeError("the restarted controller did not catch up")


def partitions(total: int) -> None:
    topics = max(total // PARTITIONS_PER_TOPIC, 1)
    print(f"\n{topics * PARTITIONS_PER_TOPIC} partitions ({topics} topics of "
          f"{PARTITIONS_PER_TOPIC})")  # fmt: skip
    print("                   | create s | RSS MB per node     | restart s | RSS MB per node")
    with tempfile.TemporaryDirectory(prefix="moldau-bench-partitions-") as data_dir:
        with Broker(data_dir=data_dir) as broker:
            created = _create_partitioned(broker.bootstrap, topics, 1)
            rss_created = [megabytes(broker.rss_bytes())]
        started = time.monotonic()
        with Broker(data_dir=data_dir) as broker:
            _wait_all_led(broker.bootstrap, topics)
            restarted = time.monotonic() - started
            rss_restarted = [megabytes(broker.rss_bytes())]
    _row("single node (RF 1)", created, rss_created, restarted, rss_restarted)
    with Cluster() as cluster:
        created = _create_partitioned(cluster.bootstrap, topics, 3)
        rss_created = [megabytes(rss_bytes(p.pid)) for p in cluster.processes.values()]
        for node in cluster.ports:
            cluster.kill(node, signal.SIGTERM)
        for node in cluster.ports:
            cluster.wait_stopped(node)
        started = time.monotonic()
        for node in cluster.ports:
            cluster.start(node)
        for node in cluster.ports:
            cluster.wait_ready(node)
        _wait_all_led(cluster.bootstrap, topics)
        restarted = time.monotonic() - started
        rss_restarted = [megabytes(rss_bytes(p.pid)) for p in cluster.processes.values()]
    _row("3 nodes (RF 3)", created, rss_created, restarted, rss_restarted)


def _row(
    name: str, created: float, rss_created: list[float], restarted: float, rss: list[float]
) -> None:
    created_rss = "/".join(f"{m:.0f}" for m in rss_created)
    restarted_rss = "/".join(f"{m:.0f}" for m in rss)
    print(f"{name:<18} | {created:8.1f} | {created_rss:<19} | {restarted:9.1f} | {restarted_rss}")


def _create_partitioned(bootstrap: str, topics: int, replication: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    for index in range(topics):
        _create(admin, [NewTopic(f"wide-{index}", PARTITIONS_PER_TOPIC, replication)])
    _wait_all_led(bootstrap, topics)
    return time.monotonic() - started


def _wait_all_led(bootstrap: str, topics: int) -> None:
    """Until every partition of the `wide-*` topics has a leader, in one broker's metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=30).topics
        except KafkaException:
            time.sleep(0.5)
            continue
        wide = [t for name, t in metadata.items() if name.startswith("wide-")]
        if (
            len(wide) == topics
            and all(p.leader >= 0 for t in wide for p in t.partitions.values())
            and sum(len(t.partitions) for t in wide) == topics * PARTITIONS_PER_TOPIC
        ):
            return
        time.sleep(0.5)
    raise RuntimeError("not every partition has a leader")


class Flood:
    """FLOODERS connections to one broker listener, each sending Metadata v12 requests for every
    topic back to back and never reading an answer, while the context lasts. They run in a child
    process, so that the timed client shares no GIL with fifty sending threads."""

    def __init__(self, port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._connected, self._stop = context.Event(), context.Event()
        self._process = context.Process(target=_flood, args=(port, self._connected, self._stop))

    def __enter__(self) -> Flood:
        self._process.start()
        if not self._connected.wait(60):
            raise RuntimeError("the flood did not connect")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._process.join(30)
        if self._process.exitcode is None:
            self._process.kill()
            self._process.join()

    def cpu_seconds(self) -> float:
        return cpu_seconds(self._process.pid or 0)


def _flood(port: int, connected: Event, stop: Event) -> None:
    frames = memoryview(encode_request(3, 12, 1, "flood", EVERY_TOPIC) * 20_000)

    def send(sock: socket.socket) -> None:
        sent = 0
        while sent < len(frames) and not stop.is_set():
            try:
                sent += sock.send(frames[sent : sent + (1 << 20)])
            except TimeoutError:  # (the broker reads nothing: look at `stop` again)
                continue
            except OSError:
                return

    sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(FLOODERS)]
    threads = [threading.Thread(target=send, args=(sock,)) for sock in sockets]
    for sock, thread in zip(sockets, threads, strict=True):
        sock.settimeout(0.5)
        thread.start()
    connected.set()
    stop.wait()  # the connections stay open with what they sent, whether read or not
    for thread in threads:
        thread.join()
    for sock in sockets:
        sock.close()


@dataclass(slots=True, kw_only=True)
class Round:
    """One round: the round trips of the topics created, the error of each creation refused,
    the (leader, epoch) read after each creation, and the cores of the quorum leader's process
    and of the flood."""

    flooded: bool
    creations: list[float] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    quorum_seen: list[tuple[int, int]] = field(default_factory=list)
    leader_cores: float = 0.0
    flood_cores: float = 0.0

    @property
    def mode(self) -> str:
        return "flooded" if self.flooded else "quiet"


def flood(rounds: int) -> None:
    header(f"the controller under a client flood, {rounds} quiet and {rounds} flooded rounds")
    with Cluster() as cluster:
        _create(
            AdminClient({"bootstrap.servers": cluster.bootstrap}),
            [NewTopic(f"wide-{index}", 3, 3) for index in range(20)],
        )
        wires = {node: Wire(port, 60) for node, (port, _) in cluster.ports.items()}
        quorum = _quorum(cluster.bootstrap)
        start = quorum.leader_id, quorum.leader_epoch
        print(f"quorum leader {start[0]} (epoch {start[1]}); each round floods the broker "
              "listener of the leader of its start")  # fmt: skip
        print("round | mode    | leader | creations | p50 ms | p99 ms |  max ms | leader cores | "
              "flood cores | (leader, epoch) seen, refused")  # fmt: skip
        results: list[Round] = []
        for number in range(1, 2 * rounds + 1):
            result = Round(flooded=number % 2 == 0)
            leader = _quorum(cluster.bootstrap).leader_id
            creator, observer = (wires[node] for node in sorted(wires) if node != leader)
            pid = cluster.processes[leader].pid
            with Flood(cluster.ports[leader][0]) if result.flooded else nullcontext() as flood:
                cpu_before, started = cpu_seconds(pid), time.monotonic()
                _timed_creations(creator, observer, result, f"probe-{number}")
                elapsed = time.monotonic() - started
                result.leader_cores = (cpu_seconds(pid) - cpu_before) / elapsed
                result.flood_cores = flood.cpu_seconds() / elapsed if flood else 0.0
            results.append(result)
            print(f"{number:5d} | {result.mode:<7} | {leader:6d} | {_figures(result.creations)} | "
                  f"{result.leader_cores:12.2f} | {result.flood_cores:11.2f} | "
                  f"{sorted(set(result.quorum_seen))} {dict(result.refused) or ''}")  # fmt: skip
            if result.flooded:
                time.sleep(SETTLE_S)
        for wire in wires.values():
            wire.close()
    _flood_summary(results, start)


def _timed_creations(creator: Wire, observer: Wire, result: Round, prefix: str) -> None:
    """For ROUND_S: create a topic (timed), read the quorum's (leader, epoch), delete the topic."""
    deadline = time.monotonic() + ROUND_S
    for index in itertools.count():
        if time.monotonic() >= deadline:
            return
        name = f"{prefix}-{index}"
        topic = {"name": name, "num_partitions": 1, "replication_factor": 3}
        started = time.perf_counter()
        [created] = creator.request(19, 7, {"topics": [topic], "timeout": 30_000}).topics
        if created.error_code == ErrorCode.none:
            result.creations.append(time.perf_counter() - started)
            creator.request(20, 6, {"topics": [{"name": name}], "timeout": 30_000})
        else:
            result.refused[ErrorCode(created.error_code).name] += 1
        [partition] = observer.request(55, 2, METADATA_LOG).topics[0].partitions
        result.quorum_seen.append((partition.leader_id, partition.leader_epoch))


def _figures(times: list[float]) -> str:
    """count | p50 ms | p99 ms | max ms"""
    ordered = sorted(times)
    return (f"{len(ordered):9d} | {percentile(ordered, 0.5) * 1000:6.1f} | "
            f"{percentile(ordered, 0.99) * 1000:6.1f} | "
            f"{max(ordered, default=math.nan) * 1000:7.1f}")  # fmt: skip


def _flood_summary(results: list[Round], start: tuple[int, int]) -> None:
    changes = {"quiet": 0, "flooded": 0}
    previous = start
    for result in results:
        for seen in result.quorum_seen:
            changes[result.mode] += seen != previous
            previous = seen
    print("\nmode    | creations | p50 ms | p99 ms |  max ms | rounds' median p50, p99 ms | "
          "leader changes | refused")  # fmt: skip
    medians: dict[str, tuple[float, float]] = {}
    for mode in ("quiet", "flooded"):
        rounds = [r for r in results if r.mode == mode]
        medians[mode] = (
            statistics.median(percentile(sorted(r.creations), 0.5) for r in rounds),
            statistics.median(percentile(sorted(r.creations), 0.99) for r in rounds),
        )
        p50, p99 = medians[mode]
        every = [t for r in rounds for t in r.creations]
        refused = sum((r.refused for r in rounds), Counter[str]())
        print(f"{mode:<7} | {_figures(every)} | {p50 * 1000:12.1f}, {p99 * 1000:11.1f} | "
              f"{changes[mode]:14d} | {dict(refused) or 0}")  # fmt: skip
    print(f"flooded / quiet (medians over rounds): p50 "
          f"{medians['flooded'][0] / medians['quiet'][0]:.2f}, p99 "
          f"{medians['flooded'][1] / medians['quiet'][1]:.2f}; load average {load_average()}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--flood", type=int, default=5, metavar="ROUNDS")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    if args.topics:
        creations(args.topics)
    if args.failovers:
        controller_failovers(args.failovers)
    if args.partitions:
        partitions(args.partitions)
    if args.flood:
        flood(args.flood)


if __name__ == "__main__":
    main()
