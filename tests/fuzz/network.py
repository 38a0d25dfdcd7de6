"""The network fuzzer: a real `moldau server` process under many connections of mutated, random
and malformed frames, while a well-behaved client checks that it is still served.

    python -m tests.fuzz.network --frames 1000000 --seed 1        # starts its own server
    python -m tests.fuzz.network --frames 20000 --seed 1 --json   # figures as one JSON line

What the connections send (weights in `PLANS`):
- `mutated`: requests of every API and every advertised version (frames recorded from real
  clients, plus schema-valid ones generated for each version the server advertises), with bytes
  flipped, integers overwritten, bodies cut, grown, spliced, versions and keys swapped, or the
  size prefix made wrong;
- `valid`: schema-valid requests with known topic and group names, pipelined, answers read;
- `random`: random bytes, with a plausible size prefix or none;
- `framing`: negative, zero, tiny and oversized size prefixes, large frames cut short, frames that
  stop halfway and wait;
- `never_read`: Fetch and Metadata requests pipelined by a client that reads nothing;
- `trickle`: a request one byte at a time;
- `idle`: a crowd of connections that hold a partial frame, then leave.

What is checked, throughout: the server process lives; its RSS (VmRSS of /proc/PID/status) stays
under `--rss-limit-mb`; a healthy client (one connection kept open, plus a new one each second)
gets its ApiVersions and Metadata answers within `--latency-limit-s`, and some answer within
`--hang-s` (else: a hang); the server's output holds no traceback and no ERROR line. A slow
answer fails the run when the server's event loop (its main thread) spent more than the limit in
CPU meanwhile (it was busy: worker threads on the other core do not hold up an answer); one it
was not given the CPU for (a shared machine) is counted and listed, and fails the run only with
`--strict-latency`. On a failure
the last `RECENT_FRAMES` frames sent (by connection, in order) and the server's output are saved
under `--artifacts`, and the run stops.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moldau.protocol.adapter import encode_request, request_schema
from tests.fuzz.network_checks import Probe, Settings, Watcher, api_versions, prepare, read_frame
from tests.fuzz.network_frames import (
    frame_label,
    generated_frames,
    mutate,
    recorded_frames,
    with_size,
)
from tests.fuzz.requests import TOPICS, encode_frame, fuzz_vocabulary, random_request

READY_LINE = re.compile(rb"Moldau ready: bootstrap\.servers=(?P<host>[^\s:]+):(?P<port>\d+)")
RECENT_FRAMES = 20_000
PLANS = {
    "mutated": 55,
    "valid": 20,
    "random": 8,
    "framing": 7,
    "never_read": 4,
    "trickle": 3,
    "idle": 3,
}


@dataclasses.dataclass
class Figures:
    frames: int = 0
    connections: int = 0
    by_api: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    by_plan: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    closed_by_server: int = 0
    answers: int = 0
    probes: int = 0
    worst_latency_s: float = 0.0
    worst_latency_at: str = ""
    slow_probes: int = 0
    busy_probes: int = 0
    worst_probe_loop_cpu_s: float = 0.0  # the server's event loop (main thread)
    worst_probe_process_cpu_s: float = 0.0  # all its threads
    slow_probe_list: list[str] = dataclasses.field(default_factory=list)
    peak_rss_mb: float = 0.0
    start_rss_mb: float = 0.0
    end_rss_mb: float = 0.0
    duration_s: float = 0.0
    crashes: int = 0
    hangs: int = 0
    tracebacks: int = 0
    error_lines: int = 0
    closing_lines: int = 0
    failure: str | None = None

    def as_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["by_api"] = dict(sorted(self.by_api.items(), key=lambda item: -item[1]))
        values["by_plan"] = dict(self.by_plan)
        return values


class ServerOutput:
    """Follows a server's output: counts tracebacks and ERROR lines, keeps the tail."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=400)
        self.tracebacks = 0
        self.error_lines = 0
        self.closing_lines = 0
        self.bad_lines: list[str] = []
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115

    def line(self, text: str) -> None:
        self.tail.append(text)
        if self._log is not None:
            self._log.write(text)
        if "closing connection from" in text:
            self.closing_lines += 1
        if "Traceback" in text:
            self.tracebacks += 1
            self.bad_lines.append(text)
        elif " ERROR " in text or " CRITICAL " in text:
            self.error_lines += 1
            self.bad_lines.append(text)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


class ServerProcess:
    """`python -m moldau server` on an ephemeral loopback port, data in a temporary directory."""

    def __init__(
        self,
        directory: Path,
        overrides: dict[str, str] | None = None,
        *,
        log_path: Path | None = None,
    ) -> None:
        self.directory = directory
        self.output = ServerOutput(log_path or directory / "server.log")
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(directory / "data"),
            **(overrides or {}),
        }
        command = [sys.executable, "-X", "faulthandler", "-m", "moldau", "server"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MOLDAU_")}
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
        )
        self.host = ""
        self.port = 0
        ready = threading.Event()
        threading.Thread(target=self._follow, args=(ready,), daemon=True).start()
        if not ready.wait(60) or not self.port:
            self.process.kill()
            raise RuntimeError("the server did not start:\n" + "".join(self.output.tail))

    @property
    def pid(self) -> int:
        return self.process.pid

    def _follow(self, ready: threading.Event) -> None:
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            if not ready.is_set() and (match := READY_LINE.search(raw)):
                self.host, self.port = match["host"].decode(), int(match["port"])
                ready.set()
            self.output.line(raw.decode("utf-8", "replace"))
        ready.set()

    def stop(self) -> int:
        """SIGTERM; the exit code (a server that needs SIGKILL returns -9)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        time.sleep(0.2)  # the output's last lines
        self.output.close()
        return self.process.returncode


# --- the connections -------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, host: str, port: int, settings: Settings) -> None:
        self.host = host
        self.port = port
        self.settings = settings
        self.figures = Figures()
        self.rng = random.Random(settings.seed)
        self.recent: collections.deque[tuple[float, int, str, bytes]] = collections.deque(
            maxlen=RECENT_FRAMES
        )
        self.seeds: list[bytes] = []
        self.versions: list[tuple[int, int, int]] = []
        self.vocabulary = fuzz_vocabulary()
        self.failure: str | None = None
        self._connection_ids = 0
        self._budget = settings.frames

    # the frames a plan sends are taken from one budget, so the total is exact
    def _take(self, count: int) -> int:
        count = min(count, self._budget)
        self._budget -= count
        return count

    def _sent(self, connection: int, plan: str, frame: bytes) -> None:
        self.figures.frames += 1
        self.figures.by_api[frame_label(frame) if plan != "random" else "random"] += 1
        self.recent.append((time.time(), connection, plan, frame))

    async def prepare(self) -> None:
        """The server's versions, its topics and group, and a warm-up: one schema-valid request
        of every API and version it serves. A server loads a version's message types on its
        first use (some 1.5 s of CPU for them all, once in its life); the healthy client, which
        starts after this, is there to time the fuzzing, not that."""
        self.versions = await asyncio.to_thread(api_versions, self.host, self.port)
        await asyncio.to_thread(prepare, self.host, self.port)
        self.seeds = recorded_frames() + generated_frames(self.versions, self.rng)
        rng = random.Random(f"warm-up {self.settings.seed}")  # (the fuzzing's own draws unchanged)
        frames = [
            encode_frame(
                api_key,
                version,
                random_request(api_key, version, rng, self.vocabulary),
                correlation_id=1,
            )
            for api_key, low, high in self.versions
            for version in range(low, high + 1)
            if request_schema(api_key, version) is not None
        ]
        at_once = asyncio.Semaphore(self.settings.connections)

        async def send(frame: bytes) -> None:
            async with at_once:
                with contextlib.suppress(ConnectionError, TimeoutError, OSError):
                    reader, writer = await asyncio.open_connection(self.host, self.port)
                    try:
                        writer.write(frame)
                        await writer.drain()
                        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 2))
                        await asyncio.wait_for(reader.readexactly(size[0]), 2)
                    except asyncio.IncompleteReadError:
                        pass  # (closed: SASL requests on a plaintext listener, for one)
                    finally:
                        writer.close()

        await asyncio.gather(*(send(frame) for frame in frames))

    async def run(self) -> None:
        workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.connections)]
        await asyncio.gather(*workers)

    async def _worker(self) -> None:
        plans, weights = zip(*PLANS.items(), strict=True)
        while self._budget > 0 and self.failure is None:
            plan = self.rng.choices(plans, weights)[0]
            self._connection_ids += 1
            connection = self._connection_ids
            self.figures.by_plan[plan] += 1
            try:
                await getattr(self, f"_{plan}")(connection)
            except (ConnectionError, TimeoutError, OSError):
                self.figures.closed_by_server += 1

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.figures.connections += 1
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )
        return reader, writer

    async def _send_and_read(self, connection: int, plan: str, frames: list[bytes]) -> None:
        reader, writer = await self._open()
        try:
            for frame in frames:
                self._sent(connection, plan, frame)
                writer.write(frame)
            await writer.drain()
            await self._read_answers(reader, len(frames))
        finally:
            writer.close()

    async def _read_answers(self, reader: asyncio.StreamReader, expected: int) -> None:
        """Read answers until `expected` came, the server closed, or it is quiet for a while
        (acks=0 produces and parked fetches answer nothing, or later)."""
        for _ in range(expected):
            try:
                header = await asyncio.wait_for(reader.readexactly(4), 0.5)
                (size,) = struct.unpack(">i", header)
                await asyncio.wait_for(reader.readexactly(size), 5)
            except asyncio.IncompleteReadError:
                self.figures.closed_by_server += 1
                return
            except TimeoutError:
                return
            self.figures.answers += 1

    async def _mutated(self, connection: int) -> None:
        count = self._take(self.rng.choice((1, 1, 1, 2, 3, 5)))
        frames = [mutate(self.rng.choice(self.seeds), self.rng, self.seeds) for _ in range(count)]
        await self._send_and_read(connection, "mutated", frames)

    async def _valid(self, connection: int) -> None:
        frames = []
        for index in range(self._take(self.rng.randint(1, 20))):
            api_key, low, high = self.rng.choice(self.versions)
            version = self.rng.randint(low, high)
            if request_schema(api_key, version) is None:
                version = high
            request = random_request(api_key, version, self.rng, self.vocabulary)
            frames.append(encode_frame(api_key, version, request, correlation_id=index))
        await self._send_and_read(connection, "valid", frames)

    async def _random(self, connection: int) -> None:
        if not self._take(1):
            return
        blob = self.rng.randbytes(self.rng.choice((1, 3, 8, 30, 200, 2000)))
        if self.rng.random() < 0.5:
            blob = with_size(struct.pack(">hhi", self.rng.randrange(-2, 80), 0, 1) + blob)
        await self._send_and_read(connection, "random", [blob])

    async def _framing(self, connection: int) -> None:
        if not self._take(1):
            return
        rng = self.rng
        limit = self.settings.max_frame_bytes
        choice = rng.randrange(6)
        reader, writer = await self._open()
        try:
            if choice == 0:  # negative, zero, tiny
                frame = struct.pack(">i", rng.choice((-1, -(2**31), 0, 1, 3, 7))) + b"\x00" * 7
            elif choice == 1:  # over socket.request.max.bytes
                frame = struct.pack(">i", rng.choice((limit + 1, 2**31 - 1))) + b"\x00" * 64
            elif choice == 2:  # a large frame cut short: the pool's reservation, then the close
                claimed = rng.choice((100_000, 1 << 20, 16 << 20, limit))
                frame = struct.pack(">i", claimed) + rng.randbytes(rng.choice((0, 10, 70_000)))
            elif choice == 3:  # a request cut short, then a wait (the request deadline)
                whole = rng.choice(self.seeds)
                frame = whole[: rng.randrange(1, len(whole))]
            elif choice == 4:  # two requests glued, the second with a lying prefix
                frame = rng.choice(self.seeds) + struct.pack(">i", 1 << 20) + b"\x00" * 100
            else:  # a whole valid request behind a frame of zero bytes
                frame = struct.pack(">i", 0) + rng.choice(self.seeds)
            self._sent(connection, "framing", frame)
            writer.write(frame)
            await writer.drain()
            if choice == 3:
                await asyncio.sleep(rng.random())
            await self._read_answers(reader, 1)
        finally:
            writer.close()

    async def _never_read(self, connection: int) -> None:
        count = self._take(self.rng.randint(10, 40))
        _reader, writer = await self._open()
        sock = writer.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        fetch = encode_request(1, 11, 1, "never-reads" * 100, {
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": TOPICS[0], "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        })  # fmt: skip
        metadata = encode_request(3, 12, 2, "never-reads", {"topics": None})
        try:
            for index in range(count):
                frame = fetch if index % 2 else metadata
                self._sent(connection, "never_read", frame)
                writer.write(frame)
                if writer.transport.get_write_buffer_size() > 1 << 20:
                    break  # the server stopped reading us: back-pressure works
                if index % 16 == 15:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(self.rng.random() * 2)
        finally:
            writer.transport.abort()

    async def _trickle(self, connection: int) -> None:
        if not self._take(1):
            return
        frame = self.rng.choice(self.seeds)
        reader, writer = await self._open()
        try:
            self._sent(connection, "trickle", frame)
            for start in range(0, len(frame), 3):
                writer.write(frame[start : start + 3])
                await asyncio.sleep(0.005)
            await writer.drain()
            await self._read_answers(reader, 1)
        finally:
            writer.close()

    async def _idle(self, connection: int) -> None:
        count = self._take(self.rng.randint(10, 60))
        writers = []
        try:
            for _ in range(count):
                _reader, writer = await self._open()
                frame = self.rng.choice(self.seeds)
                partial = frame[: self.rng.randrange(0, min(len(frame), 12))]
                self._sent(connection, "idle", partial)
                writer.write(partial)
                writers.append(writer)
            await asyncio.sleep(self.rng.random() * 2)
        finally:
            for writer in writers:
                writer.transport.abort()

    def save(self, reason: str, server_output: str) -> Path:
        """The recent frames, one file each (`<n>-<time>-c<connection>-<plan>-<api>`), and why."""
        directory = self.settings.artifacts / f"network-{time.strftime('%Y%m%d-%H%M%S')}"
        directory.mkdir(parents=True, exist_ok=True)
        for index, (when, connection, plan, frame) in enumerate(self.recent):
            clock = time.strftime("%H%M%S", time.localtime(when)) + f"{when % 1:.3f}"[1:]
            name = f"{index:05d}-{clock}-c{connection}-{plan}-{frame_label(frame)}"
            (directory / name).write_bytes(frame)
        (directory / "failure.txt").write_text(f"{reason}\n\nserver output:\n{server_output}")
        return directory


def fuzz(
    host: str,
    port: int,
    pid: int,
    settings: Settings,
    *,
    output: ServerOutput | None = None,
    output_text: Callable[[], str] = lambda: "",
) -> Figures:
    """Run the fuzzer against a server already running; returns its figures, with `failure` set
    (and the recent frames saved) when a check failed."""
    fuzzer = Fuzzer(host, port, settings)
    watcher = Watcher(host, port, pid, settings)
    started = time.monotonic()

    def check() -> str | None:
        if output is not None and output.bad_lines:
            return "the server logged: " + "".join(output.bad_lines[:5])
        return watcher.poll()

    async def main() -> None:
        await fuzzer.prepare()
        watcher.start()
        task = asyncio.create_task(fuzzer.run())
        while not task.done():
            await asyncio.sleep(0.2)
            fuzzer.failure = fuzzer.failure or check()
        await task

    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
    time.sleep(1.0)  # the server's log lines of the last connections
    watcher.stop()
    figures = fuzzer.figures
    for key, value in watcher.figures.items():
        setattr(figures, key, value)
    figures.duration_s = round(time.monotonic() - started, 1)
    if output is not None:
        figures.tracebacks = output.tracebacks
        figures.error_lines = output.error_lines
        figures.closing_lines = output.closing_lines
    failure = fuzzer.failure or check()
    if failure is None and figures.busy_probes:
        failure = (
            f"{figures.busy_probes} healthy-client answers waited for more than "
            f"{settings.latency_limit_s} s of the server's event loop CPU time (worst "
            f"{figures.worst_probe_loop_cpu_s:.2f} s)"
        )
    if failure is None and figures.slow_probes and settings.strict_latency:
        failure = (
            f"{figures.slow_probes} healthy-client answers over {settings.latency_limit_s} s "
            f"(worst {figures.worst_latency_s:.2f} s)"
        )
    if failure is not None:
        figures.failure = f"{failure} (saved in {fuzzer.save(failure, output_text())})"
    return figures


def replay(directory: Path, settings: Settings) -> str | None:
    """Send the frames saved in `directory` (in name order, one connection each, as saved by a
    failure) to a fresh server, checking it after each; returns what failed, naming the frame."""
    with tempfile.TemporaryDirectory(prefix="moldau-netfuzz-") as data:
        server = ServerProcess(Path(data))
        probe = Probe(server.host, server.port, server.pid, settings)
        failure = None
        try:
            prepare(server.host, server.port)
            for path in sorted(directory.iterdir()):
                if path.name == "failure.txt":
                    continue
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection((server.host, server.port), 10) as sock,
                ):
                    sock.sendall(path.read_bytes())
                    sock.settimeout(0.3)
                    with contextlib.suppress(OSError, ConnectionError):
                        read_frame(sock)  # one answer, the server's close, or 0.3 s of quiet
                problem = probe.check() or probe.probe(fresh=True)
                if problem is None and server.output.bad_lines:
                    problem = "the server logged: " + "".join(server.output.bad_lines[:5])
                if problem is not None:
                    failure = f"after {path.name}: {problem}"
                    break
        finally:
            if failure is not None and probe.alive():
                server.process.kill()  # a hung server would not stop in time
            code = server.stop()
        if failure is None and code != 0:
            failure = f"the server exited with code {code} on SIGTERM"
    return failure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=Settings.frames)
    parser.add_argument("--seed", type=int, default=Settings.seed)
    parser.add_argument("--connections", type=int, default=Settings.connections)
    parser.add_argument("--rss-limit-mb", type=float, default=Settings.rss_limit_mb)
    parser.add_argument("--latency-limit-s", type=float, default=Settings.latency_limit_s)
    parser.add_argument("--artifacts", type=Path, default=Settings.artifacts)
    parser.add_argument(
        "--strict-latency", action="store_true", help="any answer over the limit fails the run"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--replay", type=Path, help="replay the frames a failure saved")
    arguments = parser.parse_args()
    if arguments.replay is not None:
        failure = replay(arguments.replay, Settings(rss_limit_mb=arguments.rss_limit_mb))
        print(failure or "no failure")
        sys.exit(1 if failure else 0)
    settings = Settings(
        frames=arguments.frames,
        seed=arguments.seed,
        connections=arguments.connections,
        rss_limit_mb=arguments.rss_limit_mb,
        latency_limit_s=arguments.latency_limit_s,
        strict_latency=arguments.strict_latency,
        artifacts=arguments.artifacts,
    )
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    log_path = settings.artifacts / f"server-{time.strftime('%Y%m%d-%H%M%S')}.log"
    with tempfile.TemporaryDirectory(prefix="moldau-netfuzz-") as directory:
        server = ServerProcess(Path(directory), log_path=log_path)
        try:
            figures = fuzz(
                server.host,
                server.port,
                server.pid,
                settings,
                output=server.output,
                output_text=lambda: "".join(server.output.tail),
            )
        finally:
            code = server.stop()
        if code != 0 and figures.failure is None:
            figures.failure = f"the server exited with code {code} on SIGTERM"
            figures.crashes += 1
    if arguments.json:
        print(json.dumps(figures.as_dict()))
    else:
        for key, value in figures.as_dict().items():
            print(f"{key}: {value}")
    sys.exit(1 if figures.failure else 0)


if __name__ == "__main__":
    main()
