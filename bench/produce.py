"""Produce throughput on one node: 100 B and 1 KB records, acks=1 and acks=all, two batching profiles.

    .venv/bin/python bench/produce.py [--generator confluent-kafka|rdkafka_performance]
                                      [--seconds S] [--sizes 100,1024] [--acks 1,all]

Each case starts a fresh `moldau server`, creates a one-partition topic, and runs the load
generator in its own process: confluent-kafka (a Python loop over `produce()`, librdkafka
underneath) or librdkafka's C `rdkafka_performance` (see build_rdkafka_performance.sh). Profiles:
`default` is librdkafka's batching with linger.ms=5; `large` lingers 50 ms with batches up to
1 MB; `per-request` (not in the default set) sends one record per batch with no linger, a
measure of the broker's cost per request. Prints records/s, MB/s (record values), broker and generator CPU (cores, from /proc and
rusage), then the same-run ceilings and the ratios the targets of issue 8 are stated in.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import ceilings
from _harness import Broker, children_cpu_seconds, create_topic, header, run_child

PROFILES = ("default", "large")  # and "per-request", run on its own with --profiles
C_PROFILES = {
    "default": ["-X", "linger.ms=5"],
    "large": ["-X", "linger.ms=50", "-X", "batch.size=1000000", "-X", "batch.num.messages=1000000"],
    "per-request": ["-X", "linger.ms=0", "-X", "batch.num.messages=1"],
}


def rdkafka_performance() -> str | None:
    """Path of librdkafka's C performance tool, if it was built (or is on PATH)."""
    candidates = [
        os.environ.get("RDKAFKA_PERFORMANCE", ""),
        str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
            / "moldau-bench" / "rdkafka_performance"),
        shutil.which("rdkafka_performance") or "",
    ]  # fmt: skip
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def produce_case(
    generator: str, size: int, acks: str, profile: str, records: int
) -> dict[str, float]:
    """One run on a fresh broker: records/s, MB/s, broker and generator cores."""
    with Broker() as broker:
        create_topic(broker.bootstrap, "bench")
        if generator == "confluent-kafka":
            run = run_child(
                "_producer.py",
                [broker.bootstrap, "bench", "--records", str(records), "--size", str(size),
                 "--acks", acks, "--profile", profile],
                broker,
            )  # fmt: skip
            if run.result["errors"]:
                raise RuntimeError(f"{run.result['errors']} delivery errors")
            elapsed, broker_cores, child_cores = (
                run.result["elapsed_s"], run.broker_cpu_s / run.wall_s, run.child_cores
            )  # fmt: skip
        else:
            tool = rdkafka_performance()
            assert tool is not None, "run bench/build_rdkafka_performance.sh first"
            broker_before, child_before = broker.cpu_seconds(), children_cpu_seconds()
            start = time.perf_counter()
            subprocess.run(
                [tool, "-P", "-t", "bench", "-p", "0", "-b", broker.bootstrap, "-s", str(size),
                 "-c", str(records), "-a", "-1" if acks == "all" else acks, "-q",
                 "-X", "queue.buffering.max.messages=1000000", *C_PROFILES[profile]],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
            elapsed = time.perf_counter() - start
            broker_cores = (broker.cpu_seconds() - broker_before) / elapsed
            child_cores = (children_cpu_seconds() - child_before) / elapsed
    return {
        "records_s": records / elapsed,
        "mb_s": records * size / elapsed / 1e6,
        "broker_cores": broker_cores,
        "generator_cores": child_cores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generator", choices=["confluent-kafka", "rdkafka_performance"],
                        default="confluent-kafka")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=3.0, help="rough length of each run")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header(f"produce, one partition, generator {args.generator}")
    print(" size acks profile  | records/s      MB/s | broker cores  generator cores")
    results = {}
    for size in sizes:
        # Aim at the rough length asked for, from a guess of the rate (1.5 M/s, or 400 MB/s).
        records = int(args.seconds * min(1_500_000, 400e6 / size))
        if args.profiles == "per-request":
            records = int(args.seconds * 20_000)
        for acks in args.acks.split(","):
            for profile in args.profiles.split(","):
                figures = produce_case(args.generator, size, acks, profile, records)
                results[size, acks, profile] = figures
                print(f"{size:5d} {acks:>4} {profile:8} | {figures['records_s']:9,.0f} "
                      f"{figures['mb_s']:9,.1f} | {figures['broker_cores']:12.2f} "
                      f"{figures['generator_cores']:16.2f}", flush=True)  # fmt: skip
    directory = os.environ.get("TMPDIR", "/tmp")
    header("same-run ceilings")
    fsync_ceiling = ceilings.best_of(3, lambda: ceilings.raw_append(directory, 512, fsync=True))
    append_ceiling = ceilings.best_of(3, lambda: ceilings.raw_append(directory, 1024))
    print(f"raw append {append_ceiling:,.0f} MB/s; fsync every 1 MiB {fsync_ceiling:,.0f} MB/s "
          "(best of 3 each); "
          f"loopback TCP {ceilings.loopback_tcp():,.0f} MB/s")  # fmt: skip
    generator_ceiling = {size: ceilings.producer_ceiling(2_000_000, size) for size in sizes}
    if args.generator == "confluent-kafka":
        for size, rate in generator_ceiling.items():
            print(f"confluent-kafka enqueue ceiling, {size} B records: {rate:,.0f} records/s")
    header("ratios")
    for (size, acks, profile), figures in results.items():
        line = f"{size:5d} {acks:>4} {profile:8}"
        if args.generator == "confluent-kafka":
            line += f" | of generator ceiling {figures['records_s'] / generator_ceiling[size]:.2f}"
        line += f" | of raw append {figures['mb_s'] / append_ceiling:.2f}"
        if acks == "all":
            line += f" | of fsync-every-1 MiB {figures['mb_s'] / fsync_ceiling:.2f}"
        if size == 100 and acks == "1":
            line += f" | of 1 M records/s target {figures['records_s'] / 1e6:.2f}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
