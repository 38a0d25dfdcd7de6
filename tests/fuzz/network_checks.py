"""The network fuzzer's checks: the run's settings, reading answers off a socket, preparing the
server (topics, a group) and the healthy client that probes it while the fuzzer runs (its
ApiVersions and Metadata answers timed against the CPU time of the server's event loop)."""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.queues
import os
import queue
import socket
import struct
import time
from pathlib import Path
from typing import Any

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch
from tests.fuzz.requests import TOPICS


@dataclasses.dataclass
class Settings:
    frames: int = 20_000
    seed: int = 1
    connections: int = 48
    rss_limit_mb: float = 600.0
    latency_limit_s: float = 1.0
    # A probe slower than the limit fails the run only if the server spent more CPU than the
    # limit meanwhile (it was busy, not starved by other processes on a shared machine), unless
    # strict: then any slow answer fails it.
    strict_latency: bool = False
    hang_s: float = 10.0
    artifacts: Path = Path("fuzz-artifacts")
    max_frame_bytes: int = 104_857_600  # the server's socket.request.max.bytes


def read_frame(sock: socket.socket) -> bytes:
    header = _recv_exactly(sock, 4)
    return _recv_exactly(sock, struct.unpack(">i", header)[0])


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return bytes(data)


def api_versions(host: str, port: int) -> list[tuple[int, int, int]]:
    with _connect_soon(host, port) as sock:
        sock.sendall(encode_request(18, 3, 1, "fuzz", {"client_software_name": "fuzz"}))
        _, response = decode_response(18, 3, read_frame(sock))
    return [(api.api_key, api.min_version, api.max_version) for api in response.api_keys]


def _connect_soon(host: str, port: int) -> socket.socket:
    """A connection, retried for a few seconds while it is refused (a server just started)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def prepare(host: str, port: int) -> None:
    """The topics of the fuzzers' vocabulary, with records, and the internal topics (created by
    the first FindCoordinator of each kind: done here, so that their one-time creation is not
    taken for a fuzzed frame's cost)."""
    with socket.create_connection((host, port), timeout=30) as sock:
        for key_type in (0, 1):
            deadline = time.monotonic() + 30
            while True:
                sock.sendall(encode_request(10, 4, 3, "fuzz-setup", {
                    "key_type": key_type, "coordinator_keys": ["fuzz"]}))  # fmt: skip
                answer = decode_response(10, 4, read_frame(sock))[1]
                if answer.coordinators[0].error_code == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)  # polling pace: the node creates the topic meanwhile
        topics = [{"name": name, "num_partitions": count, "replication_factor": 1}
                  for name, count in zip(TOPICS, (3, 1), strict=True)]  # fmt: skip
        sock.sendall(encode_request(19, 7, 1, "fuzz-setup", {"topics": topics,
                                                             "timeout": 10_000}))  # fmt: skip
        read_frame(sock)
        batch = build_batch([NewRecord(key=b"k%d" % i, value=b"v" * i) for i in range(10)])
        for partition in range(3):
            sock.sendall(encode_request(0, 9, 2, "fuzz-setup", {
                "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": TOPICS[0],
                                "partition_data": [{"index": partition, "records": batch}]}],
            }))  # fmt: skip
            read_frame(sock)


class Watcher:
    """Probes the server as a healthy client would and reads its RSS, from a process of its own
    (so that the fuzzer's own work never delays a probe): `failure` is set on the first broken
    check, and `stop()` adds its figures to the fuzzer's."""

    def __init__(self, host: str, port: int, pid: int, settings: Settings) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._messages: multiprocessing.queues.Queue[tuple[str, Any]] = context.Queue()
        self._process = context.Process(
            target=_watch,
            args=(host, port, pid, settings, self._stop, self._messages),
            daemon=True,
        )
        self.failure: str | None = None
        self.figures: dict[str, Any] = {}

    def start(self) -> None:
        self._process.start()

    def poll(self) -> str | None:
        while self.failure is None:
            try:
                kind, value = self._messages.get_nowait()
            except queue.Empty:
                break
            if kind == "failure":
                self.failure = value
            else:
                self.figures = value
        return self.failure

    def stop(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + 60
        while not self.figures and time.monotonic() < deadline:
            try:
                kind, value = self._messages.get(timeout=1)
            except queue.Empty:
                continue
            if kind == "failure":
                self.failure = self.failure or value
            else:
                self.figures = value
        self._process.join(10)


def _watch(
    host: str,
    port: int,
    pid: int,
    settings: Settings,
    stop: Any,
    messages: multiprocessing.queues.Queue[tuple[str, Any]],
) -> None:
    probe = Probe(host, port, pid, settings)
    last_new_connection = 0.0
    figures = probe.figures
    figures["start_rss_mb"] = probe.rss_mb()
    failed = False
    while not stop.wait(0.1):
        fresh = time.monotonic() - last_new_connection >= 1.0
        if fresh:
            last_new_connection = time.monotonic()
        failure = probe.check() or probe.probe(fresh)
        if failure is not None and not failed:
            failed = True
            messages.put(("failure", failure))
    figures["end_rss_mb"] = probe.rss_mb()
    messages.put(("figures", figures))


class Probe:
    def __init__(self, host: str, port: int, pid: int, settings: Settings) -> None:
        self.host = host
        self.port = port
        self.pid = pid
        self.settings = settings
        self.figures: dict[str, Any] = {
            "probes": 0,
            "worst_latency_s": 0.0,
            "slow_probes": 0,
            "busy_probes": 0,
            "worst_probe_loop_cpu_s": 0.0,
            "worst_probe_process_cpu_s": 0.0,
            "peak_rss_mb": 0.0,
            "crashes": 0,
            "hangs": 0,
        }
        self._socket: socket.socket | None = None
        self._correlation_id = 0

    def alive(self) -> bool:
        try:
            return "zombie" not in Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return False

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def cpu_s(self, thread: bool = False) -> float:
        """User and system CPU seconds the server has used: all its threads, or with `thread`
        its main thread's alone (the event loop's, which answers every client)."""
        stat = f"/proc/{self.pid}/task/{self.pid}/stat" if thread else f"/proc/{self.pid}/stat"
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def check(self) -> str | None:
        """Alive and under the RSS bound, or what is wrong."""
        if not self.alive():
            self.figures["crashes"] = 1
            return "the server process died"
        rss = self.rss_mb()
        self.figures["peak_rss_mb"] = max(self.figures["peak_rss_mb"], rss)
        if rss > self.settings.rss_limit_mb:
            return f"RSS {rss:.0f} MB over the bound of {self.settings.rss_limit_mb} MB"
        return None

    def probe(self, fresh: bool) -> str | None:
        """ApiVersions and Metadata on the kept connection (on a new one once a second)."""
        self._correlation_id += 1
        started = time.monotonic()
        cpu_before, loop_cpu_before = self.cpu_s(), self.cpu_s(thread=True)
        try:
            if fresh:
                with socket.create_connection((self.host, self.port), self.settings.hang_s) as s:
                    self._exchange(s)
            else:
                if self._socket is None:
                    self._socket = socket.create_connection(
                        (self.host, self.port), self.settings.hang_s
                    )
                    self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._exchange(self._socket)
        except (OSError, AssertionError) as error:
            if self._socket is not None:
                self._socket.close()
                self._socket = None
            if isinstance(error, TimeoutError):
                self.figures["hangs"] += 1
                return f"the healthy client got no answer within {self.settings.hang_s} s"
            if not self.alive():
                self.figures["crashes"] = 1
                return "the server process died"
            return f"the healthy client failed: {error!r}"
        latency = time.monotonic() - started
        cpu = self.cpu_s() - cpu_before
        loop_cpu = self.cpu_s(thread=True) - loop_cpu_before
        self.figures["probes"] += 1
        for key, value in (("loop", loop_cpu), ("process", cpu)):
            name = f"worst_probe_{key}_cpu_s"
            self.figures[name] = max(self.figures[name], value)
        # Busy: the event loop itself ran for longer than the limit while this client waited
        # (the process's CPU time would also count the worker threads on the other core, which
        # do not hold up an answer).
        if loop_cpu > self.settings.latency_limit_s:
            self.figures["busy_probes"] += 1
        if latency > self.figures["worst_latency_s"]:
            self.figures["worst_latency_s"] = latency
            self.figures["worst_latency_at"] = time.strftime("%H:%M:%S")
        if latency > self.settings.latency_limit_s:
            self.figures["slow_probes"] += 1
            # The event loop's CPU time meanwhile tells a busy server (about the latency) from
            # one the machine did not run (little CPU: other processes had the cores).
            kind = "new connection" if fresh else "kept connection"
            load = Path("/proc/loadavg").read_text().split()[0]
            self.figures.setdefault("slow_probe_list", []).append(
                f"{time.strftime('%H:%M:%S')} {kind} {latency:.2f} s, event loop CPU "
                f"{loop_cpu:.2f} s (all threads {cpu:.2f} s), load {load}"
            )
        return None

    def _exchange(self, sock: socket.socket) -> None:
        sock.sendall(encode_request(18, 3, self._correlation_id, "healthy", {}))
        _, versions = decode_response(18, 3, read_frame(sock))
        assert versions.error_code == ErrorCode.none, versions.error_code
        # Any answer will do: the fuzzing may well have deleted the topic meanwhile.
        sock.sendall(encode_request(3, 12, self._correlation_id, "healthy",
                                    {"topics": [{"name": TOPICS[0]}]}))  # fmt: skip
        decode_response(3, 12, read_frame(sock))
