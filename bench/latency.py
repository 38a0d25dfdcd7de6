"""End-to-end latency at a fixed rate: produce → consume and produce → ack, acks=1 and acks=all.

    .venv/bin/python bench/latency.py [--rate 10000] [--seconds 10] [--pacing kafka|record]
                                      [--cluster]

For each acks setting a fresh `moldau server` (with `--cluster`: three combined nodes, the topic
replicated three times with min.insync.replicas 2) gets a one-partition topic; a confluent-kafka
consumer process waits at its start, then a confluent-kafka producer process sends 100-byte
records at `--rate` per second (linger.ms=0, Nagle off on both clients), each stamped with the
machine's monotonic clock when it is handed to the client. `--pacing kafka` (the default) sleeps
as Kafka's producer performance tool does, once 2 ms of schedule is owed (groups of 20 records
every 2 ms at 10k/s); `--pacing record` sleeps before every record.

Prints p50/p99/p99.9/max of produce → consume and produce → ack; the machine's busy and stolen
CPU share while each ran (steal: the hypervisor running others; both sampled at clock ticks, so
load that wakes in step with the timer reads low) and the cores the broker and the producer
process used (exact); and in the same run the p50/p99/p99.9 of a 1 KB write + fsync on the data
directory (what one group commit costs): acks=all latency is read against it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

import ceilings
from _harness import (
    BENCH_DIR,
    Broker,
    children_cpu_seconds,
    create_topic,
    describe_machine_cpu,
    header,
    machine_cpu_ticks,
    percentile,
)


def run_latency(
    acks: str, rate: int, seconds: float, pacing: str, *, cluster: bool = False
) -> tuple[dict[str, list[float]], str]:
    from cluster import Cluster, create_replicated_topic

    with Cluster() if cluster else Broker() as broker:
        if cluster:
            create_replicated_topic(broker.bootstrap, "latency")
        else:
            create_topic(broker.bootstrap, "latency")
        records = int(rate * seconds)
        consumer = subprocess.Popen(
            [sys.executable, str(BENCH_DIR / "_latency.py"), "consume", broker.bootstrap,
             "latency", "--records", str(records)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert consumer.stderr is not None
            for line in consumer.stderr:
                if line.startswith("ready"):
                    break
            ticks, started = machine_cpu_ticks(), time.monotonic()
            broker_before, producer_before = broker.cpu_seconds(), children_cpu_seconds()
            produced = subprocess.run(
                [sys.executable, str(BENCH_DIR / "_latency.py"), "produce", broker.bootstrap,
                 "latency", "--rate", str(rate), "--seconds", str(seconds), "--acks", acks,
                 "--pacing", pacing],
                check=True, capture_output=True, text=True, timeout=seconds * 3 + 60,
            )  # fmt: skip
            producer_cpu = children_cpu_seconds() - producer_before  # start-up included
            output, _ = consumer.communicate(timeout=120)
            machine = describe_machine_cpu(ticks, machine_cpu_ticks())
            elapsed = time.monotonic() - started
            broker_cores = (broker.cpu_seconds() - broker_before) / elapsed
            machine += f"; cores: broker {broker_cores:.2f}, producer {producer_cpu / elapsed:.2f}"
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
        consumed = json.loads(output.strip().splitlines()[-1])
        acked = json.loads(produced.stdout.strip().splitlines()[-1])
        if consumed["records"] < records:
            print(f"(consumer saw {consumed['records']} of {records} records)")
        latencies = {
            "produce → consume": consumed["consumed_ms"],
            "produce → ack": acked["acked_ms"],
        }
        return latencies, machine


def describe(samples: list[float]) -> str:
    return (f"p50 {percentile(samples, 0.5):7.2f}  p99 {percentile(samples, 0.99):7.2f}  "
            f"p99.9 {percentile(samples, 0.999):7.2f}  max {samples[-1] if samples else 0:7.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--pacing", choices=["kafka", "record"], default="kafka")
    parser.add_argument("--cluster", action="store_true", help="three nodes, replication 3")
    args = parser.parse_args()
    header(f"latency at {args.rate:,} records/s for {args.seconds:g} s, 100-byte records, "
           f"{args.pacing} pacing (ms)")  # fmt: skip
    p99s = {}
    for acks in ("1", "all"):
        latencies, machine = run_latency(
            acks, args.rate, args.seconds, args.pacing, cluster=args.cluster
        )
        for name, samples in latencies.items():
            print(f"acks={acks:3} {name:18} {describe(samples)}  ({len(samples):,} records)")
            p99s[acks, name] = percentile(samples, 0.99)
        print(f"acks={acks:3} while it ran: {machine}")
    with tempfile.TemporaryDirectory() as directory:
        p50, p99, p999 = ceilings.fsync_latency(directory)
    print(f"same-run 1 KB write + fsync: p50 {p50:.2f}  p99 {p99:.2f}  p99.9 {p999:.2f}")
    header("against the targets")
    print(f"acks=1 produce → consume p99 {p99s['1', 'produce → consume']:.2f} ms (target ≤ 5 ms)")
    for name in ("produce → consume", "produce → ack"):
        print(f"acks=all {name} p99 - fsync p99 = {p99s['all', name] - p99:.2f} ms (target ≤ 5 ms)")


if __name__ == "__main__":
    main()
