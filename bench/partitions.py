"""Many partitions on one node: open descriptors, RSS, creation and start-up time, the oversized
CreateTopics/CreatePartitions attack, and how long a healthy client waits meanwhile.

    .venv/bin/python bench/partitions.py [--partitions 20000] [--per-topic 1000]
        [--produce-to 2000] [--override KEY=VALUE ...] [--skip-attack]

(20,000 partitions of one's own need `--override max.broker.partitions=20100`: the default cap
counts the 100 internal ones; `prlimit --nofile=4096:4096 .venv/bin/python bench/...` runs the
broker under a lower descriptor limit.)

Steps, on one fresh `moldau server`: create `--partitions` partitions as topics of `--per-topic`
(one CreateTopics request each), produce one record to each of the first `--produce-to` of them
(so their active segments have data and indexes), then read the broker's open descriptors
(`/proc/PID/fd`), RSS and `RLIMIT_NOFILE`; send CreateTopics and CreatePartitions asking for
2^31-1 partitions; stop it with SIGTERM and start it again on the same directory, timing the
start-up to the ready line, and read descriptors and RSS once more. All along a probe thread
sends ApiVersions every 20 ms on its own connection and reports its slowest answer per phase.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from _harness import READY, header, rss_bytes

from moldau.protocol.adapter import decode_response, encode_request

_INT32_MAX = 2**31 - 1


class Wire:
    """One connection sending raw requests (kio-encoded) and waiting for each answer."""

    def __init__(self, port: int, timeout: float = 600.0) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.correlation_id += 1
        self.socket.sendall(encode_request(api_key, version, self.correlation_id, "bench", body))
        (size,) = struct.unpack(">i", self._read(4))
        _correlation_id, response = decode_response(api_key, version, self._read(size))
        return response

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.socket.close()


class Probe:
    """ApiVersions every 20 ms; `phase(name)` reports the slowest answer since the last phase."""

    def __init__(self, port: int) -> None:
        self._wire = Wire(port, timeout=120)
        self._slowest = 0.0
        self._count = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            start = time.perf_counter()
            try:
                self._wire.request(18, 3, {"client_software_name": "probe",
                                           "client_software_version": "1"})  # fmt: skip
            except OSError:
                return
            took = time.perf_counter() - start
            with self._lock:
                self._slowest = max(self._slowest, took)
                self._count += 1

    def phase(self) -> str:
        with self._lock:
            slowest, count = self._slowest, self._count
            self._slowest, self._count = 0.0, 0
        return f"probe: {count} answers, slowest {slowest * 1000:.0f} ms"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._wire.close()


def open_descriptors(pid: int) -> dict[str, int]:
    """Open descriptors of a process by kind: segment files, other files, sockets, other."""
    kinds = {"segment files": 0, "other files": 0, "sockets": 0, "other": 0}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            kinds["sockets"] += 1
        elif target.endswith((".log", ".index", ".timeindex", ".txnindex")):
            kinds["segment files"] += 1
        elif target.startswith("/"):
            kinds["other files"] += 1
        else:
            kinds["other"] += 1
    return kinds


def nofile_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return f"soft {soft}, hard {hard}"
    return "?"


def start_broker(data_dir: str, overrides: list[str]) -> tuple[subprocess.Popen[str], int, float]:
    arguments = [sys.executable, "-m", "moldau", "server"]
    for override in ("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={data_dir}", *overrides):
        arguments += ["--override", override]
    started = time.perf_counter()
    with open(log_path(data_dir), "a") as log:
        process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        match = READY.search(line)
        if match:
            return process, int(match.group(1).rsplit(":", 1)[1]), time.perf_counter() - started
    process.wait()
    raise RuntimeError(f"moldau server did not start:\n{log_tail(data_dir)}")


def log_path(data_dir: str) -> str:
    return data_dir + ".log"


def log_tail(data_dir: str, lines: int = 15) -> str:
    """The last lines of the broker's stderr (kept beside its data directory)."""
    try:
        with open(log_path(data_dir)) as log:
            return "".join(log.readlines()[-lines:])
    except OSError:
        return ""


def stop_broker(process: subprocess.Popen[str]) -> tuple[int, float]:
    started = time.perf_counter()
    process.terminate()
    code = process.wait(600)
    return code, time.perf_counter() - started


def describe(pid: int) -> str:
    kinds = open_descriptors(pid)
    total = sum(kinds.values())
    parts = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return f"open descriptors {total} ({parts}); RSS {rss_bytes(pid) / 1e6:.0f} MB"


def create_topics(wire: Wire, topics: list[tuple[str, int]]) -> list[tuple[str, int, str]]:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": count,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name, count in topics
        ],
        "timeout_ms": 600_000,
        "validate_only": False,
    }
    response = wire.request(19, 7, body)
    return [(t.name, t.error_code, t.error_message or "") for t in response.topics]


def create_partitions(wire: Wire, name: str, count: int) -> tuple[int, str]:
    body = {
        "topics": [{"name": name, "count": count, "assignments": None}],
        "timeout_ms": 600_000,
        "validate_only": False,
    }
    [result] = wire.request(37, 3, body).results
    return result.error_code, result.error_message or ""


def produce_one(wire: Wire, topic: str, partitions: range) -> int:
    """One 100-byte record to each partition (acks=1, one request); returns the errors."""
    from moldau.protocol.records import NewRecord, build_batch

    batch = build_batch([NewRecord(key=None, value=b"x" * 100)], timestamp=int(time.time() * 1000))
    response = wire.request(0, 9, {
        "acks": 1, "timeout": 60_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": p, "records": batch} for p in partitions]}],
    })  # fmt: skip
    return sum(1 for t in response.responses for p in t.partition_responses if p.error_code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--per-topic", type=int, default=1_000)
    parser.add_argument("--produce-to", type=int, default=2_000)
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--skip-attack", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir:
        try:
            run(args, data_dir, soft, hard)
        except Exception:
            print(f"broker's last lines:\n{log_tail(data_dir)}")
            raise
        finally:
            if os.path.exists(log_path(data_dir)):
                os.remove(log_path(data_dir))


def run(args: argparse.Namespace, data_dir: str, soft: int, hard: int) -> None:
    if True:
        process, port, start_s = start_broker(data_dir, args.override)
        header(f"{args.partitions} partitions on one node (this shell's RLIMIT_NOFILE: "
               f"soft {soft}, hard {hard})")  # fmt: skip
        limit = nofile_limit(process.pid)
        print(f"fresh start: {start_s:.1f} s to ready; broker RLIMIT_NOFILE {limit}")
        print(f"idle: {describe(process.pid)}")
        probe = Probe(port)
        wire = Wire(port)
        try:
            created = 0
            failures: list[tuple[str, int, str]] = []
            started = time.perf_counter()
            index = 0
            while created < args.partitions and not failures:
                count = min(args.per_topic, args.partitions - created)
                results = create_topics(wire, [(f"wide-{index}", count)])
                failures = [r for r in results if r[1] != 0]
                if not failures:
                    created += count
                index += 1
            created_s = time.perf_counter() - started
            print(f"created {created} partitions in {created_s:.1f} s "
                  f"({created / max(created_s, 1e-9):,.0f}/s); {probe.phase()}")  # fmt: skip
            if failures:
                print(f"  stopped at a refusal: {failures[0]}")
            if process.poll() is not None:
                print(f"  the broker exited with code {process.returncode}")
                return
            produced = 0
            errors = 0
            started = time.perf_counter()
            for topic_index in range(index):
                if produced >= args.produce_to:
                    break
                count = min(args.per_topic, args.produce_to - produced)
                errors += produce_one(wire, f"wide-{topic_index}", range(count))
                produced += count
            print(f"produced one record to {produced} partitions in "
                  f"{time.perf_counter() - started:.1f} s ({errors} errors); {probe.phase()}")  # fmt: skip
            print(f"after creation: {describe(process.pid)}")
            if not args.skip_attack:
                for label in ("CreateTopics 2^31-1", "CreatePartitions to 2^31-1"):
                    started = time.perf_counter()
                    try:
                        outcome: object = (
                            create_topics(wire, [("huge", _INT32_MAX)])[0][1:]
                            if label.startswith("CreateTopics")
                            else create_partitions(wire, "wide-0", _INT32_MAX)
                        )
                    except OSError as error:
                        outcome = f"connection lost: {error}"
                        if process.poll() is None:
                            wire = Wire(port)
                    took = time.perf_counter() - started
                    alive = process.poll() is None
                    print(f"{label}: answered in {took * 1000:.0f} ms: {outcome}; broker "
                          f"{'alive' if alive else 'DEAD'}; {probe.phase()}")  # fmt: skip
                    if not alive:
                        return
                    print(f"  {describe(process.pid)}")
        finally:
            probe.close()
            wire.close()
        code, stop_s = stop_broker(process)
        print(f"SIGTERM: exit code {code} after {stop_s:.1f} s")
        try:
            process, port, start_s = start_broker(data_dir, args.override)
        except RuntimeError as error:
            print(f"restart FAILED: {error}")
            return
        print(f"restart with {created} partitions: {start_s:.1f} s to ready")
        print(f"after restart: {describe(process.pid)}")
        code, stop_s = stop_broker(process)
        print(f"SIGTERM: exit code {code} after {stop_s:.1f} s")


if __name__ == "__main__":
    main()
