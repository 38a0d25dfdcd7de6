"""Schema registry throughput: registrations/s and lookups by id/s, next to the HTTP framework's
own rate for an empty handler, measured in the same run.

    .venv/bin/python bench/registry.py [--rounds 7] [--seconds 2] [--connections 8] [--schemas 200]

One `moldau server` (a single node) serves the registry on a free port; a second process serves
a Starlette route answering `{}` with the registry's own uvicorn set-up (`bench/_empty_http.py`):
what the framework costs per request before any registry code runs. A load generator in this
process (uvloop) keeps N keep-alive HTTP/1.1 connections busy, one request in flight on each, for
S seconds per measurement. Each round measures, in turn: the empty handler (`GET /`), lookups by
id (`GET /schemas/ids/ID` over the `--schemas` ids registered first) and registrations (`POST
/subjects/bench-K-value/versions`, a new Avro record schema under a new subject each time: an id
decided by the writer, a record appended to `_schemas` with acks=all and applied before the
answer). Prints each round, the median of each kind, and lookups / empty handler (goal ≥ 0.5).

Each measurement also reads the CPU time the serving process spent (/proc), per request: on a
machine that other work keeps busy the request rates swing with the CPU the servers get, while
their cost per request moves much less, so the ratio of costs is printed beside the ratio of
rates. (The node's cost includes its broker's background work, which is small when idle.)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import uvloop
from _harness import BENCH_DIR, Broker, cpu_seconds, header

REGISTRY_LINE = re.compile(r"Moldau schema registry: http://(\S+):(\d+)")


@dataclass(frozen=True, slots=True)
class Measurement:
    requests: int
    seconds: float
    server_cpu_s: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_us(self) -> float:
        """The serving process's CPU per request, in µs."""
        return 1e6 * self.server_cpu_s / max(1, self.requests)


def request_bytes(method: str, target: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {target} HTTP/1.1\r\nHost: bench\r\n"
        "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def load(
    host: str, port: int, requests: Iterator[bytes], *, connections: int, seconds: float, pid: int
) -> Measurement:
    """Keep `connections` connections sending the next of `requests` as soon as the answer to
    the last arrived, for `seconds`; every answer must be 200."""
    deadline = time.perf_counter() + seconds
    done = 0

    async def one_connection() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                writer.write(next(requests))
                head = await reader.readuntil(b"\r\n\r\n")
                status = head[9:12]
                length = int(re.search(rb"(?i)content-length: *(\d+)", head)[1])  # type: ignore[index]
                body = await reader.readexactly(length)
                if status != b"200":
                    raise RuntimeError(f"answered {status.decode()}: {body[:200]!r}")
                done += 1
        finally:
            writer.close()

    cpu_before = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(one_connection() for _ in range(connections)))
    return Measurement(done, time.perf_counter() - started, cpu_seconds(pid) - cpu_before)


def registrations(prefix: str) -> Iterator[bytes]:
    for number in itertools.count():
        schema = {
            "type": "record",
            "name": f"R{number}",
            "fields": [{"name": "f", "type": "string"}],
        }
        body = json.dumps({"schema": json.dumps(schema)}).encode()
        yield request_bytes("POST", f"/subjects/{prefix}-{number}-value/versions", body)


def lookups(ids: list[int]) -> Iterator[bytes]:
    for schema_id in itertools.cycle(ids):
        yield request_bytes("GET", f"/schemas/ids/{schema_id}")


def empties() -> Iterator[bytes]:
    request = request_bytes("GET", "/")
    while True:
        yield request


async def register_first(host: str, port: int, count: int) -> list[int]:
    """Register `count` schemas; their ids."""
    reader, writer = await asyncio.open_connection(host, port)
    ids = []
    try:
        for request in itertools.islice(registrations("seed"), count):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head)[1])  # type: ignore[index]
            ids.append(json.loads(await reader.readexactly(length))["id"])
    finally:
        writer.close()
    return ids


async def measure(
    arguments: argparse.Namespace, registry: tuple[str, int, int], empty: tuple[int, int]
) -> None:
    """`registry`: host, port, pid; `empty`: the empty handler's port and pid."""
    host, port, registry_pid = registry
    ids = await register_first(host, port, arguments.schemas)
    kinds: dict[str, Callable[[int], Iterator[bytes]]] = {
        "empty handler": lambda _: empties(),
        "lookups by id": lambda _: lookups(ids),
        "registrations": lambda round_number: registrations(f"bench{round_number}"),
    }
    targets = {"empty handler": ("127.0.0.1", empty[0], empty[1])}
    results: dict[str, list[Measurement]] = {kind: [] for kind in kinds}
    print(
        f"{'round':>6} | " + " | ".join(f"{kind:>22}" for kind in kinds)
        + "   (requests/s, server CPU per request)"
    )  # fmt: skip
    for round_number in range(1, arguments.rounds + 1):
        row = []
        for kind, requests in kinds.items():
            target_host, target_port, pid = targets.get(kind, (host, port, registry_pid))
            result = await load(
                target_host, target_port, requests(round_number),
                connections=arguments.connections, seconds=arguments.seconds, pid=pid,
            )  # fmt: skip
            results[kind].append(result)
            row.append(f"{result.rate:>10.0f} {result.cpu_us:>8.0f} µs")
        print(f"{round_number:>6} | " + " | ".join(row), flush=True)
    rates = {kind: statistics.median(m.rate for m in found) for kind, found in results.items()}
    costs = {kind: statistics.median(m.cpu_us for m in found) for kind, found in results.items()}
    print(
        f"{'median':>6} | "
        + " | ".join(f"{rates[kind]:>10.0f} {costs[kind]:>8.0f} µs" for kind in kinds)
    )
    for kind in ("lookups by id", "registrations"):
        print(
            f"{kind} / empty handler: rate {rates[kind] / rates['empty handler']:.3f}, "
            f"inverse CPU cost {costs['empty handler'] / costs[kind]:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--schemas", type=int, default=200)
    arguments = parser.parse_args()
    header(
        f"schema registry: {arguments.rounds} rounds of {arguments.seconds:.0f} s per kind, "
        f"{arguments.connections} connections"
    )
    empty = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / "_empty_http.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert empty.stdout is not None
        empty_port = int(empty.stdout.readline().split()[1])
        with Broker("schema.registry.listeners=http://127.0.0.1:0") as broker:
            found = [REGISTRY_LINE.search(line) for line in broker.startup_lines]
            match = next(m for m in found if m is not None)
            registry = (match[1], int(match[2]), broker.pid)
            uvloop.install()
            asyncio.run(measure(arguments, registry, (empty_port, empty.pid)))
    finally:
        empty.terminate()
        empty.wait(10)


if __name__ == "__main__":
    main()
