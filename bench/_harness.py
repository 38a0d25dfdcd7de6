"""Shared pieces of the broker benchmarks: a broker process, /proc sampling, child load processes.

`Broker` starts `moldau server` on a temporary data directory and loopback port and exposes its
pid, CPU seconds and RSS read from /proc. `run_child` runs a load generator (a Python script in
its own process) and returns its JSON result together with the CPU the broker and the child
spent meanwhile. Nothing here asserts timings: benchmarks print figures and ratios.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
READY = re.compile(r"bootstrap\.servers=(\S+)")
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def machine_cpu_ticks() -> list[int]:
    """The machine's CPU time by kind (first line of /proc/stat: user nice system idle iowait irq
    softirq steal), in clock ticks since boot."""
    with open("/proc/stat") as stat:
        return [int(field) for field in stat.readline().split()[1:9]]


def describe_machine_cpu(before: list[int], after: list[int]) -> str:
    """Busy and stolen shares of the machine's CPU time between two `machine_cpu_ticks()`.

    Steal is time the hypervisor ran something else while this VM wanted a CPU: every ms of it
    lands in some latency figure, and nothing in the broker can win it back.
    """
    spent = [later - earlier for earlier, later in zip(before, after, strict=True)]
    total = sum(spent) or 1
    idle = spent[3] + spent[4]
    return f"machine CPU busy {100 * (total - idle - spent[7]) / total:.0f} %, steal {100 * spent[7] / total:.1f} %"


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Broker:
    """A `moldau server` process on loopback with its data in a temporary directory."""

    def __init__(self, *overrides: str, data_dir: str | None = None) -> None:
        self._temporary = None if data_dir else tempfile.TemporaryDirectory(prefix="moldau-bench-")
        self.data_dir = data_dir or self._temporary.name  # type: ignore[union-attr]
        self._overrides = overrides
        self._process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.startup_lines: list[str] = []  # what it printed up to its ready line

    def __enter__(self) -> Broker:
        arguments = [sys.executable, "-m", "moldau", "server"]
        for override in ("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={self.data_dir}",
                         *self._overrides):  # fmt: skip
            arguments += ["--override", override]
        # (from the data directory: `python -m moldau` looks in the current directory before
        # PYTHONPATH, so started from a checkout it would run that checkout's code, whatever
        # PYTHONPATH names)
        self._process = subprocess.Popen(
            arguments,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=self.data_dir,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.startup_lines.append(line)
            match = READY.search(line)
            if match:
                self.bootstrap = match.group(1)
                break
        if not self.bootstrap:
            self._process.kill()
            raise RuntimeError("moldau server did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._temporary is not None:
            self._temporary.cleanup()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)


@dataclass
class ChildRun:
    """What a load-generator child reported, plus the CPU spent while it ran."""

    result: dict[str, Any]
    wall_s: float
    broker_cpu_s: float
    child_cpu_s: float

    @property
    def broker_cores(self) -> float:
        return self.broker_cpu_s / self.wall_s

    @property
    def child_cores(self) -> float:
        return self.child_cpu_s / self.wall_s


def run_child(script: str, arguments: Sequence[str], broker: Broker | None, *,
              timeout_s: float = 300) -> ChildRun:  # fmt: skip
    """Run bench/SCRIPT in its own Python process; it prints one JSON object on its last line."""
    broker_before = broker.cpu_seconds() if broker else 0.0
    child_before = children_cpu_seconds()
    start = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *arguments],
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    wall_s = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return ChildRun(
        result=result,
        wall_s=wall_s,
        broker_cpu_s=(broker.cpu_seconds() - broker_before) if broker else 0.0,
        child_cpu_s=children_cpu_seconds() - child_before,
    )


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def header(title: str) -> None:
    print(f"\n== {title}  (load average {load_average()}, {os.cpu_count()} CPUs)")


def megabytes(byte_count: float) -> float:
    return byte_count / 1e6
