"""The metadata quorum measured against one node, in the same run on this machine: topic
creations per second, controller failover time, and the creation, start-up time and RSS of a
cluster holding many partitions.

    .venv/bin/python bench/controller.py [--topics 200] [--failovers 10] [--partitions 10000]

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

Everything shares two cores, so the single-node column run next to it is what to compare with.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time

from _harness import Broker, megabytes, rss_bytes
from cluster import Cluster
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.client import SyncAdminClient

PARTITIONS_PER_TOPIC = 100


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    if args.topics:
        creations(args.topics)
    if args.failovers:
        controller_failovers(args.failovers)
    if args.partitions:
        partitions(args.partitions)


if __name__ == "__main__":
    main()
