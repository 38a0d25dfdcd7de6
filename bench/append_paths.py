"""CPU time of one `PartitionLog.append_as_leader` on each of its paths, in process, on a real disk.

    .venv/bin/python bench/append_paths.py [--appends 10000] [--label A]

Paths: the fast path (a plain batch: no producer id, a codec below zstd, a topic that decodes
nothing), and the general path taken by an idempotent producer's batch and by a zstd batch.
Each case appends the same 1 KB batch of 10 records `--appends` times to a fresh log, best of
3; the figure is process CPU time per append (`time.process_time`), which a busy machine
disturbs less than wall time. For an A/B, run it alternately with PYTHONPATH on each tree and
compare minima.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from moldau.clock import SYSTEM_CLOCK
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, build_batch
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import OsFileSystem
from moldau.storage.log_loader import load_partition_log
from moldau.types import TopicPartition

RECORDS = [NewRecord(key=b"k%d" % i, value=b"v" * 100) for i in range(10)]


def batches(count: int, **fields: object) -> list[bytearray]:
    out = []
    for index in range(count):
        if "producer_id" in fields:
            fields["base_sequence"] = index * len(RECORDS)
        now = int(time.time() * 1000)
        out.append(bytearray(build_batch(RECORDS, timestamp=now, **fields)))  # type: ignore[arg-type]
    return out


def per_append_us(data: list[bytearray]) -> float:
    best = float("inf")
    for _ in range(3):
        with tempfile.TemporaryDirectory(prefix="moldau-append-") as directory:
            log = load_partition_log(
                OsFileSystem(),
                f"{directory}/t-0",
                TopicPartition("t", 0),
                LogConfig(),
                clock=SYSTEM_CLOCK,
            )
            copies = [bytearray(batch) for batch in data]  # appends rewrite them in place
            start = time.process_time()
            for batch in copies:
                log.append_as_leader(batch, leader_epoch=0)
            best = min(best, (time.process_time() - start) / len(copies))
            log.close()
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=10_000)
    parser.add_argument("--label", default="", help="printed first on every line (for A/B runs)")
    args = parser.parse_args()
    cases = {
        "fast (plain)": batches(args.appends),
        "general (idempotent)": batches(args.appends, producer_id=1, producer_epoch=0),
        "general (zstd)": batches(args.appends, compression=CompressionType.ZSTD),
    }
    for name, data in cases.items():
        print(f"{args.label} {name:21s} {per_append_us(data):6.2f} us CPU per append".strip())


if __name__ == "__main__":
    main()
