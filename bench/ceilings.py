"""The machine's own ceilings, measured in the same run as the broker figures they bound.

    .venv/bin/python bench/ceilings.py [--dir DIR] [--megabytes N]

- raw append: `os.write` of 1 MiB buffers into a new file in the data directory (page cache);
- fsync every 1 MiB: the same with an `os.fsync` after each write (what acks=all costs at best);
- fsync latency: write 1 KB + fsync, percentiles (what one group commit costs);
- loopback TCP: `sendall` of 1 MiB buffers to a `recv_into` loop in another thread;
- sendfile: `os.sendfile` of a page-cached file to the same receiver (the zero-copy fetch bound);
- replicated append: the data movement of acks=all with three replicas and nothing else — a
  leader writes and fsyncs each 1 MiB, sends it with `os.sendfile` to two follower processes,
  which write and fsync it and acknowledge; up to 8 MiB in flight (the bound of a replicated
  cluster on this machine, as "fsync every 1 MiB" bounds one node);
- load generator: records/s that confluent-kafka can enqueue with no broker to send to.

Every benchmark script imports these functions and prints its figures next to them.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

from _harness import header, percentile, run_child

MIB = 1 << 20


def best_of(runs: int, measure: Callable[[], float]) -> float:
    """The best of several runs: the machine is shared and noisy, a ceiling is what it can do."""
    return max(measure() for _ in range(runs))


def raw_append(directory: str, megabytes: int = 1024, *, fsync: bool = False) -> float:
    """MB/s of sequential 1 MiB `os.write`s into a new file (optionally each + `os.fsync`)."""
    buffer = os.urandom(MIB)
    path = os.path.join(directory, f"ceiling-{os.getpid()}.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(megabytes):
            os.write(fd, buffer)
            if fsync:
                os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return megabytes * MIB / elapsed / 1e6


def fsync_latency(
    directory: str, count: int = 2000, size: int = 1024
) -> tuple[float, float, float]:
    """(p50, p99, p99.9) in ms of `os.write(size bytes)` + `os.fsync` on a growing file."""
    buffer = os.urandom(size)
    path = os.path.join(directory, f"fsync-{os.getpid()}.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    samples = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, buffer)
            os.fsync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    samples.sort()
    return percentile(samples, 0.5), percentile(samples, 0.99), percentile(samples, 0.999)


@contextlib.contextmanager
def _receiver(buffer_size: int = 4 * MIB) -> Iterator[tuple[socket.socket, Callable[[], int]]]:
    """A connected socket pair over loopback; the far end drains into a buffer in a thread."""
    server = socket.create_server(("127.0.0.1", 0))
    received = 0

    def sink() -> None:
        nonlocal received
        connection, _ = server.accept()
        buffer = bytearray(buffer_size)
        with connection:
            while count := connection.recv_into(buffer):
                received += count

    thread = threading.Thread(target=sink)
    thread.start()
    client = socket.create_connection(server.getsockname())
    try:
        yield client, lambda: received
    finally:
        client.close()
        thread.join()
        server.close()


def loopback_tcp(megabytes: int = 2048) -> float:
    """MB/s of a plain TCP copy over loopback between two threads."""
    chunk = b"\0" * MIB
    with _receiver() as (client, _received):
        start = time.perf_counter()
        for _ in range(megabytes):
            client.sendall(chunk)
    return megabytes * MIB / (time.perf_counter() - start) / 1e6


def sendfile(path: str, total_bytes: int, *, receive_buffer: int = 4 * MIB) -> float:
    """MB/s of `os.sendfile` from a (page-cached) file to a loopback socket, repeating the file.

    The receiver reads into a buffer of `receive_buffer` bytes (give it the fetch size when the
    figure bounds a fetch benchmark, so both receive loops touch the same amount of memory).
    """
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, 1, 0)
        with _receiver(receive_buffer) as (client, _received):
            sent = 0
            start = time.perf_counter()
            while sent < total_bytes:
                offset = 0
                while offset < size and sent < total_bytes:
                    count = os.sendfile(client.fileno(), fd, offset, min(size - offset, 64 * MIB))
                    offset += count
                    sent += count
    finally:
        os.close(fd)
    return sent / (time.perf_counter() - start) / 1e6


def sendfile_scratch(directory: str, megabytes: int = 1024) -> float:
    """The sendfile ceiling over a scratch file written (and so cached) in `directory`."""
    path = os.path.join(directory, f"sendfile-{os.getpid()}.bin")
    with open(path, "wb") as scratch:
        for _ in range(min(megabytes, 256)):
            scratch.write(os.urandom(MIB))
    try:
        return sendfile(path, megabytes * MIB)
    finally:
        os.unlink(path)


_ACK = struct.Struct(">q")


def _follower(address: tuple[str, int], path: str, total: int) -> None:
    """Receive `total` bytes in 1 MiB chunks; write, fsync and acknowledge each."""
    buffer = bytearray(MIB)
    view = memoryview(buffer)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with socket.create_connection(address) as connection:
            received = 0
            while received < total:
                filled = 0
                while filled < MIB:
                    count = connection.recv_into(view[filled:])
                    if not count:
                        return
                    filled += count
                os.write(fd, view)
                os.fsync(fd)
                received += MIB
                connection.sendall(_ACK.pack(received))
    finally:
        os.close(fd)


def replicated_append(directory: str, megabytes: int = 512, *, window_mib: int = 8) -> float:
    """MB/s acknowledged by both followers of a leader that writes, fsyncs and sendfiles 1 MiB
    chunks (see the module's docstring); the followers are processes of their own."""
    total = megabytes * MIB
    chunk = os.urandom(MIB)
    context = multiprocessing.get_context("fork")
    with socket.create_server(("127.0.0.1", 0)) as server:
        followers = [
            context.Process(
                target=_follower,
                args=(server.getsockname(), os.path.join(directory, f"follower-{i}.bin"), total),
            )
            for i in range(2)
        ]
        for follower in followers:
            follower.start()
        connections = [server.accept()[0] for _ in followers]
    acknowledged = [0] * len(connections)
    progress = threading.Condition()

    def read_acks(index: int) -> None:
        with connections[index].makefile("rb") as acks:
            while acknowledged[index] < total:
                data = acks.read(_ACK.size)
                if len(data) < _ACK.size:
                    return
                with progress:
                    acknowledged[index] = _ACK.unpack(data)[0]
                    progress.notify_all()

    readers = [threading.Thread(target=read_acks, args=(i,)) for i in range(len(connections))]
    for reader in readers:
        reader.start()
    path = os.path.join(directory, f"leader-{os.getpid()}.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for position in range(0, total, MIB):
            with progress:
                progress.wait_for(lambda p=position: min(acknowledged) >= p - window_mib * MIB)
            os.write(fd, chunk)
            os.fsync(fd)
            for connection in connections:
                sent = 0
                while sent < MIB:
                    sent += os.sendfile(connection.fileno(), fd, position + sent, MIB - sent)
        with progress:
            progress.wait_for(lambda: min(acknowledged) >= total)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
        for connection in connections:
            connection.close()
        for reader in readers:
            reader.join()
        for follower in followers:
            follower.join()
        for i in range(2):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, f"follower-{i}.bin"))
    return total / elapsed / 1e6


def producer_ceiling(records: int, size: int) -> float:
    """Records/s that one confluent-kafka producer can enqueue, with nowhere to send them."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    run = run_child(
        "_producer.py",
        [f"127.0.0.1:{port}", "bench", "--records", str(records), "--size", str(size),
         "--enqueue-only"],
        None,
    )  # fmt: skip
    return records / run.result["enqueued_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir", default=None, help="data directory to measure (default: a temp dir)"
    )
    parser.add_argument("--megabytes", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        header("ceilings")
        append = best_of(3, lambda: raw_append(directory, args.megabytes))
        fsync = best_of(3, lambda: raw_append(directory, args.megabytes // 2, fsync=True))
        print(f"raw append (1 MiB writes)      {append:9,.0f} MB/s   (best of 3)")
        print(f"fsync every 1 MiB              {fsync:9,.0f} MB/s   (best of 3)")
        replicated = best_of(3, lambda: replicated_append(directory, args.megabytes // 2))
        print(f"replicated append, 3 replicas  {replicated:9,.0f} MB/s   (best of 3; "
              f"{replicated / fsync:.2f} of fsync every 1 MiB)")  # fmt: skip
        p50, p99, p999 = fsync_latency(directory)
        print(f"1 KB write + fsync latency     p50 {p50:.2f} ms  p99 {p99:.2f} ms  "
              f"p99.9 {p999:.2f} ms")  # fmt: skip
        print(f"loopback TCP                   {loopback_tcp(args.megabytes * 2):9,.0f} MB/s")
        print(
            f"sendfile (cached file)         {sendfile_scratch(directory, args.megabytes * 2):9,.0f} MB/s"
        )
        for size in (100, 1024):
            rate = producer_ceiling(3_000_000 if size == 100 else 1_000_000, size)
            print(f"confluent-kafka enqueue {size:4d} B {rate:9,.0f} records/s "
                  f"({rate * size / 1e6:,.0f} MB/s)")  # fmt: skip


if __name__ == "__main__":
    main()
