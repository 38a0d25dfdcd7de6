"""Child process of the crash test: append deterministic batches and report flushed offsets.

`run` is called in a forked child (or `python crash_child.py <log_dir> <batches>`): it appends up
to <batches> batches, then idles until killed, and reports `flushed <offset>` whenever a flush
returned a higher offset.
Batch number n (n = 0, 1, ...) is `expected_batch(n)`; offsets follow from the record counts.
"""

from __future__ import annotations

import os
import random
import sys
import threading

from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager
from moldau.types import TopicPartition

TP = TopicPartition("crash", 0)
CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512, segment_index_bytes=4096)


def record_count(n: int) -> int:
    return 1 + n % 3


def expected_batch(n: int) -> bytes:
    """Batch n as the producer sends it (base offset 0; the log rewrites it)."""
    rng = random.Random(n)
    records = [
        NewRecord(key=b"k%d" % n, value=b"%d:%d:" % (n, i) + rng.randbytes(rng.randint(0, 600)))
        for i in range(record_count(n))
    ]
    codec = CompressionType.GZIP if n % 5 == 0 else CompressionType.NONE
    return build_batch(records, compression=codec, timestamp=1_700_000_000_000 + n)


def batch_number_at(offset: int) -> int:
    """The number of the batch that starts at `offset` (offsets are sums of record counts)."""
    n = total = 0
    while total < offset:
        total += record_count(n)
        n += 1
    if total != offset:
        raise AssertionError(f"offset {offset} is not a batch boundary")
    return n


def run(log_dir: str, batches: int, out_fd: int) -> None:
    """Append up to `batches` batches, then idle; write `flushed <offset>` lines to `out_fd`."""
    manager = LogManager([log_dir], default_config=CONFIG)
    manager.startup()
    log = manager.get_or_create_log(TP, CONFIG)
    n = batch_number_at(log.log_end_offset)
    stop = threading.Event()
    output = threading.Lock()

    def report(line: str) -> None:
        with output:  # one whole line at a time
            os.write(out_fd, line.encode() + b"\n")

    def flusher() -> None:
        reported = -1
        while not stop.is_set():
            offset = log.flush()
            if offset > reported:
                report(f"flushed {offset}")
                reported = offset
            else:
                stop.wait(0.001)  # pacing only: nothing new to flush yet

    report("started")
    threads = [threading.Thread(target=flusher, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(batches):
        log.append_as_leader(expected_batch(n), leader_epoch=1)
        n += 1
    stop.wait()


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), sys.stdout.fileno())
