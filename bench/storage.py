"""Storage benchmark: PartitionLog appends against raw os.write/fsync, reads, lookups, compaction.

    .venv/bin/python bench/storage.py [--dir DIR] [--megabytes N] [--open-files N]

Appends of 1 KB, 16 KB and 1 MB batches, with and without an fsync per append, each next to a
raw `os.write` (+ `os.fsync`) loop of the same buffers into a plain file in the same directory;
the ratio column is PartitionLog throughput / raw throughput. Then read-region lookups per second
on a small and a large log (index lookups are a bisect, so the rate should barely move), and
compaction throughput. `--open-files N` writes and reads through the broker's file-handle cache
(`CachingFileSystem`, at most N files open) instead of plain `OsFileSystem` handles.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

from moldau.clock import SystemClock
from moldau.protocol.records import NewRecord, build_batch
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem, OsFileSystem
from moldau.storage.log_loader import load_partition_log
from moldau.types import TopicPartition

SIZES = [("1 KB", 1024), ("16 KB", 16 * 1024), ("1 MB", 1024 * 1024)]


def make_batch(size: int) -> bytearray:
    # a bytearray, like a request buffer read from a socket (the log may rewrite it in place)
    return bytearray(
        build_batch([NewRecord(value=os.urandom(size - 80))], timestamp=int(time.time() * 1000))
    )


FILESYSTEM: FileSystem = OsFileSystem()


def new_log(directory: str, name: str, config: LogConfig | None = None):  # type: ignore[no-untyped-def]
    return load_partition_log(
        FILESYSTEM,
        os.path.join(directory, name),
        TopicPartition(name, 0),
        config or LogConfig(),
        clock=SystemClock(),
    )


def raw_writes(path: str, data: bytes, count: int, fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.remove(path)
    return elapsed


def log_appends(directory: str, name: str, data: bytes, count: int, fsync: bool) -> float:
    log = new_log(directory, name)
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(data, leader_epoch=0)
        if fsync:
            log.flush()
    elapsed = time.perf_counter() - start
    log.close()
    shutil.rmtree(os.path.join(directory, name))
    return elapsed


def bench_appends(directory: str, megabytes: int) -> None:
    print(
        f"{'batch':>6} {'fsync':>5} | {'moldau MB/s':>11} {'batches/s':>10} | "
        f"{'raw MB/s':>9} {'writes/s':>9} | ratio"
    )
    for label, size in SIZES:
        data = make_batch(size)
        for fsync in (False, True):
            total = megabytes * 1024 * 1024 if not fsync else max(size * 200, 8 * 1024 * 1024)
            count = max(20, total // size)
            # interleave and keep the best of three runs of each, so both see the same disk state
            raw_best = log_best = float("inf")
            for round_ in range(5):
                raw_best = min(
                    raw_best, raw_writes(os.path.join(directory, "raw.bin"), data, count, fsync)
                )
                log_best = min(
                    log_best, log_appends(directory, f"bench{round_}", data, count, fsync)
                )
            mb = count * size / 1e6
            print(
                f"{label:>6} {'yes' if fsync else 'no':>5} | {mb / log_best:11.0f} {count / log_best:10.0f} | "
                f"{mb / raw_best:9.0f} {count / raw_best:9.0f} | {raw_best / log_best:5.2f}"
            )


def bench_reads(directory: str) -> None:
    print()
    print(f"{'log size':>12} | {'read lookups/s':>14}")
    data = make_batch(1024)
    for batches in (10_000, 200_000):
        log = new_log(directory, f"reads{batches}", LogConfig(segment_bytes=64 * 1024 * 1024))
        for _ in range(batches):
            log.append_as_leader(data, leader_epoch=0)
        end = log.log_end_offset
        offsets = [random.randrange(end) for _ in range(20_000)]
        start = time.perf_counter()
        for offset in offsets:
            log.read(offset, max_bytes=64 * 1024, max_offset=end)
        elapsed = time.perf_counter() - start
        print(f"{batches:>8} btc | {len(offsets) / elapsed:14.0f}")
        log.close()


def bench_compaction(directory: str) -> None:
    print()
    config = LogConfig(
        cleanup_policy=("compact",), segment_bytes=8 * 1024 * 1024, min_cleanable_dirty_ratio=0.0
    )
    log = new_log(directory, "compact", config)
    now = int(time.time() * 1000)
    for i in range(4000):
        records = [
            NewRecord(key=b"key-%d" % ((i * 10 + j) % 5000), value=os.urandom(100))
            for j in range(10)
        ]
        log.append_as_leader(build_batch(records, timestamp=now), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    size = log.size_bytes
    start = time.perf_counter()
    read = clean_log(log)
    elapsed = time.perf_counter() - start
    print(
        f"compaction: {read / 1e6:.1f} MB in {elapsed:.2f} s = {read / 1e6 / elapsed:.1f} MB/s "
        f"({size / 1e6:.1f} MB -> {log.size_bytes / 1e6:.1f} MB)"
    )
    log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", default=None, help="directory on the disk to measure (default: a temp dir)"
    )
    parser.add_argument("--megabytes", type=int, default=256, help="bytes per no-fsync run")
    parser.add_argument("--open-files", type=int, default=0, help="through the handle cache")
    args = parser.parse_args()
    if args.open_files:
        from moldau.storage.caching_filesystem import CachingFileSystem

        global FILESYSTEM
        FILESYSTEM = CachingFileSystem(OsFileSystem(), args.open_files)
    directory = tempfile.mkdtemp(prefix="moldau-bench-", dir=args.dir)
    try:
        bench_appends(directory, args.megabytes)
        bench_reads(directory)
        bench_compaction(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
