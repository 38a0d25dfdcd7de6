"""A replicated cluster against one node, in the same run on this machine.

    .venv/bin/python bench/cluster.py [--records N] [--size BYTES] [--rounds R] [--failovers K]
                                      [--partitions P] [--override KEY=VALUE ...]

Throughput: one partition, 1 KB records, acks=all, produced by confluent-kafka (`_producer.py`,
linger.ms=5); first on a single node, then on three combined nodes with replication factor 3
and min.insync.replicas 2 (every acknowledged batch fsynced on all three), rounds interleaved.
Prints records/s of each and the ratio cluster / single node, with the CPU of every broker, and
then the machine's own bound of that ratio (`ceilings.replicated_append` against an fsync every
1 MiB: three fsynced copies and two loopback streams against one fsynced copy, no broker).
`--partitions P` spreads the records over P partitions (on both); `--override` sets a property
on every cluster node (e.g. replica.fetch.max.bytes=4194304).

Failover (`--failovers K`): a producer writes acks=all records back to back; the partition
leader is SIGKILLed (or, with `--controlled`, sent SIGTERM: a controlled shutdown hands its
leadership over first); one failover is the longest time without an acknowledged write from the
signal until the first acknowledgement after the old leader's process exited; the node is
restarted and back in the ISR before the next one. Prints p50 and max
next to `broker.session.timeout.ms`.

Everything runs on one machine with two cores: the three brokers, their fsyncs and the load
generator share them, so the ratio is what to read, not the absolute figures.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ceilings
from _harness import Broker, cpu_seconds, create_topic, run_child
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

SESSION_MS = 3000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """Three combined `moldau server` processes, formatted with one cluster id."""

    def __init__(self, size: int = 3, extra: list[str] | None = None) -> None:
        self._temporary = tempfile.TemporaryDirectory(prefix="moldau-cluster-bench-")
        self.base = Path(self._temporary.name)
        self.ports = {i: (_free_port(), _free_port()) for i in range(1, size + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in self.ports.items())
        self.overrides = {
            i: [
                f"node.id={i}",
                f"listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                f"controller.quorum.voters={voters}",
                f"log.dirs={self.base / f'node-{i}'}",
                f"broker.session.timeout.ms={SESSION_MS}",
                "broker.heartbeat.interval.ms=500",
                "offsets.topic.num.partitions=3",
                "transaction.state.log.num.partitions=3",
                *(extra or []),
            ]
            for i, (p, c) in self.ports.items()
        }
        self.processes: dict[int, subprocess.Popen[str]] = {}
        cluster_id = subprocess.run(
            [sys.executable, "-m", "moldau", "storage", "random-uuid"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        for settings in self.overrides.values():
            subprocess.run(
                [sys.executable, "-m", "moldau", "storage", "format", "-t", cluster_id,
                 *_as_arguments(settings)],
                check=True, capture_output=True,
            )  # fmt: skip

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p, _ in self.ports.values())

    def start(self, node: int) -> None:
        self.processes[node] = subprocess.Popen(
            [sys.executable, "-m", "moldau", "server", *_as_arguments(self.overrides[node])],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def wait_ready(self, node: int) -> None:
        stdout = self.processes[node].stdout
        assert stdout is not None
        for line in stdout:
            if "Moldau ready" in line:
                return
        raise RuntimeError(f"node {node} did not start")

    def __enter__(self) -> Cluster:
        for node in self.ports:
            self.start(node)
        for node in self.ports:
            self.wait_ready(node)
        return self

    def kill(self, node: int, signal_number: int = signal.SIGKILL) -> None:
        self.processes[node].send_signal(signal_number)
        if signal_number == signal.SIGKILL:
            self.processes[node].wait()

    def wait_stopped(self, node: int) -> None:
        self.processes[node].wait(60)

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        self._temporary.cleanup()

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.processes.values() if p.poll() is None)


def _as_arguments(settings: list[str]) -> list[str]:
    return [part for setting in settings for part in ("--override", setting)]


def _produce(
    bootstrap: str, records: int, size: int, brokers: Any, *, spread: bool = False
) -> tuple[float, float]:
    """records/s and the brokers' cores of one `_producer.py` run (`spread`: every record to a
    random partition)."""
    spreading = ["--random-partition"] if spread else []
    run = run_child(
        "_producer.py",
        [bootstrap, "bench", "--records", str(records), "--size", str(size), "--acks", "all",
         *spreading],
        brokers,
    )  # fmt: skip
    if run.result["errors"]:
        raise RuntimeError(f"{run.result['errors']} delivery errors")
    return records / run.result["elapsed_s"], run.broker_cores


def create_replicated_topic(bootstrap: str, name: str = "bench", partitions: int = 1) -> None:
    """Replication factor 3, min.insync.replicas 2; waits for every partition's leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(timeout=5).topics.get(name)
        if (
            topic is not None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise RuntimeError("the replicated topic has no leader")


def throughput(
    records: int, size: int, rounds: int, *, partitions: int = 1, extra: list[str] | None = None
) -> None:
    spread = partitions > 1
    layout = f"{partitions} partitions, records spread at random" if spread else "one partition"
    print(f"\nacks=all, {size} B records, {records} per run, {layout}")
    if extra:
        print(f"cluster overrides: {' '.join(extra)}")
    print("round | single node rec/s  cores | 3 nodes RF=3 rec/s  cores | ratio")
    ratios = []
    for round_number in range(1, rounds + 1):
        with Broker() as broker:
            create_topic(broker.bootstrap, "bench", partitions)
            single, single_cores = _produce(broker.bootstrap, records, size, broker, spread=spread)
        with Cluster(extra=extra) as cluster:
            create_replicated_topic(cluster.bootstrap, partitions=partitions)
            replicated, cluster_cores = _produce(
                cluster.bootstrap, records, size, cluster, spread=spread
            )
        ratios.append(replicated / single)
        print(
            f"{round_number:5d} | {single:17,.0f} {single_cores:6.2f} | "
            f"{replicated:18,.0f} {cluster_cores:6.2f} | {replicated / single:5.2f}"
        )
    print(f"median ratio {statistics.median(ratios):.2f}")
    with tempfile.TemporaryDirectory() as directory:
        single_ceiling = ceilings.best_of(
            3, lambda: ceilings.raw_append(directory, 512, fsync=True)
        )
        replicated_ceiling = ceilings.best_of(3, lambda: ceilings.replicated_append(directory, 512))
    print(
        f"this machine's ceilings: fsync every 1 MiB {single_ceiling:,.0f} MB/s, replicated "
        f"append to 3 replicas {replicated_ceiling:,.0f} MB/s: ratio "
        f"{replicated_ceiling / single_ceiling:.2f} (the bound of the ratio above)"
    )


def failovers(count: int, *, controlled: bool = False) -> None:
    with Cluster() as cluster:
        create_replicated_topic(cluster.bootstrap)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
             "enable.idempotence": True, "message.timeout.ms": 60_000}
        )  # fmt: skip
        times: list[float] = []
        for _ in range(count):
            leader = admin.list_topics(timeout=10).topics["bench"].partitions[0].leader
            acked: list[float] = []

            def delivered(error: object, _message: object, acked: list[float] = acked) -> None:
                if error is None:
                    acked.append(time.monotonic())

            killed_at = time.monotonic()
            cluster.kill(leader, signal.SIGTERM if controlled else signal.SIGKILL)
            exited_at = None
            while exited_at is None or not acked or acked[-1] <= exited_at:
                producer.produce("bench", value=b"x", on_delivery=delivered)
                producer.poll(0.005)
                if exited_at is None and cluster.processes[leader].poll() is not None:
                    exited_at = time.monotonic()
            times.append(_longest_gap(killed_at, acked))
            cluster.wait_stopped(leader)
            cluster.start(leader)
            cluster.wait_ready(leader)
            _wait_isr(admin, 3)
        how = "SIGTERM (controlled shutdown)" if controlled else "SIGKILL"
        print(
            f"\nfailover ({how} of the leader: longest wait for an acknowledgement), {count} times:"
        )
        print(f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s "
              f"(broker.session.timeout.ms={SESSION_MS}); each, sorted: "
              + " ".join(f"{t:.2f}" for t in sorted(times)))  # fmt: skip


def _longest_gap(signalled_at: float, acked: list[float]) -> float:
    """The longest time without an acknowledged write from the signal on: the partition's
    unavailability. (A stopping leader may acknowledge writes until its leadership has moved;
    the new leader's first acknowledgement ends the gap that matters.)"""
    points = [signalled_at, *sorted(t for t in acked if t > signalled_at)]
    return max(later - earlier for earlier, later in itertools.pairwise(points))


def _wait_isr(admin: AdminClient, size: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            partition = admin.list_topics(timeout=5).topics["bench"].partitions[0]
            if len(partition.isrs) >= size:
                return
        except KafkaException:
            pass
        time.sleep(0.2)
    raise RuntimeError("the ISR did not grow back")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=0)
    parser.add_argument("--controlled", action="store_true", help="SIGTERM instead of SIGKILL")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the topic")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property for every cluster node (repeatable), e.g. replica.fetch.max.bytes=4194304",
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores")
    if not args.skip_throughput:
        throughput(
            args.records, args.size, args.rounds, partitions=args.partitions, extra=args.override
        )
    if args.failovers:
        failovers(args.failovers, controlled=args.controlled)


if __name__ == "__main__":
    main()
