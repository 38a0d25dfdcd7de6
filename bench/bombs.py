"""Decompression bombs against a real broker: what each attack costs, and whether others are served.

The attacks of the hardening issue (items 5 and 6), each on a fresh `moldau server`:

- `produce`: a ~1.5 KB zstd batch of 2,396,000 empty records (16.8 MB decoded) produced over and
  over to a compacted topic and to a topic with `compression.type=gzip` (both decode records);
- `within-limits`: requests of 40 batches of ~60 bytes of zstd, each declaring 140,000 keyed
  records (under the 149,798 a batch may hold), to a compacted topic;
- `list-offsets`: a ~6 KB zstd batch of 9,580,000 records (67 MB decoded) stored on a topic whose
  `max.message.bytes` allows it, then ListOffsets by timestamp and MAX_TIMESTAMP over and over;
- `cleaner`: a 128 KB zstd batch that inflates to 4 GiB of zeros stored on a delete-policy topic
  switched to `cleanup.policy=compact`, next to a healthy compacted topic with duplicate keys.

While an attack runs, a healthy client sends ApiVersions and a small produce on its own
connection; the script prints the slowest of its answers, the broker's CPU seconds and its peak
RSS (VmHWM in /proc/PID/status), and what the attacker was answered. Figures only, no verdicts.

    .venv/bin/python bench/bombs.py [--seconds 10] [--attacks produce,within-limits,list-offsets,cleaner]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any

from _harness import Broker, cpu_seconds, header

from moldau.protocol.records import NewRecord, build_batch, iter_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the attack batches of the tests
from tests.bombs import (
    EMPTY_RECORD,
    KEYED_EMPTY_RECORD,
    LOOKUP_BOMB_RECORDS,
    PRODUCE_BOMB_RECORDS,
    claiming,
    empty_records_zstd,
    zstd_zeros,
)
from tests.integration.healthy_client import HealthyClient
from tests.integration.wire import (
    Connection,
    alter_topic,
    create_topic,
    fetch,
    list_offsets,
    produce,
)


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def count_records(connection: Connection, topic: str) -> int:
    """Records (by their batches' counts) of partition 0, read from its log start."""
    start = list_offsets(connection, topic, 0, -2).offset
    data = fetch(connection, topic, 0, start, max_bytes=50_000_000).records or b""
    return sum(batch.header.records_count for batch in iter_batches(data))


def run_attack(broker: Broker, seconds: float, attack: Any, healthy_topic: str) -> None:
    cpu_before = cpu_seconds(broker.pid)
    results: dict[str, int] = {}
    durations: list[float] = []
    with HealthyClient("127.0.0.1", broker.port, healthy_topic) as healthy:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            began = time.perf_counter()
            outcome = attack()
            durations.append(time.perf_counter() - began)
            results[outcome] = results.get(outcome, 0) + 1
        wall = time.perf_counter() - start
    print(
        f"  attacker: {len(durations)} requests in {wall:.1f} s, slowest {max(durations):.2f} s, "
        f"answers {results}"
    )
    print(
        f"  healthy client: {healthy.answers} answers, slowest {healthy.slowest * 1000:.0f} ms"
        + (f", failed: {healthy.failure!r}" if healthy.failure else "")
    )
    print(
        f"  broker: {cpu_seconds(broker.pid) - cpu_before:.1f} CPU s, "
        f"peak RSS {peak_rss_mb(broker.pid):.0f} MB"
    )


def attack_produce(seconds: float) -> None:
    payload = empty_records_zstd(EMPTY_RECORD, PRODUCE_BOMB_RECORDS)
    keyed = empty_records_zstd(KEYED_EMPTY_RECORD, PRODUCE_BOMB_RECORDS)
    for topic, configs, data in (
        ("compacted", {"cleanup.policy": "compact"}, keyed),
        ("recompressed", {"compression.type": "gzip"}, payload),
    ):
        with Broker() as broker:
            connection = Connection("127.0.0.1", broker.port, timeout=120)
            create_topic(connection, "healthy", {})
            create_topic(connection, topic, configs)
            now = int(time.time() * 1000)
            bomb = claiming(data, PRODUCE_BOMB_RECORDS, timestamp=now)
            header(f"produce: {len(bomb)} B zstd batch of 2,396,000 records to a {topic} topic")
            print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
            run_attack(
                broker,
                seconds,
                lambda: str(produce(connection, topic, 0, bomb).error_code),  # noqa: B023
                "healthy",
            )


def attack_within_limits(seconds: float) -> None:
    # batches that pass every per-batch limit (140,000 records, under the 149,798 allowed), 40 of
    # them in each request's record set: what bounds a request is the request's budget
    with Broker() as broker:
        connection = Connection("127.0.0.1", broker.port, timeout=120)
        create_topic(connection, "healthy", {})
        create_topic(connection, "compacted", {"cleanup.policy": "compact"})
        now = int(time.time() * 1000)
        one = claiming(empty_records_zstd(KEYED_EMPTY_RECORD, 140_000), 140_000, timestamp=now)
        request = one * 40
        header(
            f"within limits: {len(one)} B zstd batches of 140,000 records, 40 in a "
            f"{len(request)} B request, to a compacted topic"
        )
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        run_attack(
            broker,
            seconds,
            lambda: str(produce(connection, "compacted", 0, request).error_code),
            "healthy",
        )


def attack_list_offsets(seconds: float) -> None:
    payload = empty_records_zstd(EMPTY_RECORD, LOOKUP_BOMB_RECORDS)
    with Broker() as broker:
        connection = Connection("127.0.0.1", broker.port, timeout=120)
        create_topic(connection, "healthy", {})
        create_topic(connection, "stored", {"max.message.bytes": str(100 * 1024 * 1024)})
        now = int(time.time() * 1000)
        # every record at `now`, the header's max one second later: a lookup between the two
        # must look inside the batch
        bomb = claiming(payload, LOOKUP_BOMB_RECORDS, timestamp=now, max_timestamp=now + 1000)
        stored = produce(connection, "stored", 0, bomb)
        header(
            f"list-offsets: {len(bomb)} B zstd batch of 9,580,000 records stored "
            f"(produce answered {stored.error_code})"
        )
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        targets = itertools.cycle([now + 500, -3])
        run_attack(
            broker,
            seconds,
            lambda: str(list_offsets(connection, "stored", 0, next(targets)).error_code),
            "healthy",
        )


def attack_cleaner(seconds: float) -> None:
    with Broker("log.cleaner.backoff.ms=500") as broker:
        connection = Connection("127.0.0.1", broker.port, timeout=120)
        create_topic(connection, "healthy", {})
        create_topic(connection, "victim", {"segment.bytes": "200000"})
        create_topic(
            connection,
            "compacted",
            {
                "cleanup.policy": "compact",
                "segment.bytes": "2000",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        now = int(time.time() * 1000)
        bomb = claiming(zstd_zeros(4 << 30), 1, timestamp=now)
        stored = produce(connection, "victim", 0, bomb)
        # a second batch past segment.bytes rolls the bomb's segment: it becomes cleanable
        filler = build_batch([NewRecord(key=b"k", value=b"x" * 100_000)], timestamp=now)
        produce(connection, "victim", 0, filler)
        produce(connection, "victim", 0, filler)
        for round_ in range(20):
            records = [NewRecord(key=b"key-%d" % (i % 5), value=b"v%d" % round_) for i in range(10)]
            produce(connection, "compacted", 0, build_batch(records, timestamp=now))
        header(
            f"cleaner: {len(bomb)} B zstd batch inflating to 4 GiB (produce answered {stored.error_code})"
        )
        alter_topic(connection, "victim", {"cleanup.policy": "compact"})
        print(f"  broker idle: peak RSS {peak_rss_mb(broker.pid):.0f} MB")
        before = count_records(connection, "compacted")
        run_attack(broker, seconds, lambda: (time.sleep(0.2), "waiting")[1], "healthy")
        print(
            f"  healthy compacted topic: {before} records before, "
            f"{count_records(connection, 'compacted')} after"
        )


ATTACKS = {
    "produce": attack_produce,
    "within-limits": attack_within_limits,
    "list-offsets": attack_list_offsets,
    "cleaner": attack_cleaner,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each attack runs")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated subset")
    arguments = parser.parse_args()
    for name in arguments.attacks.split(","):
        ATTACKS[name](arguments.seconds)


if __name__ == "__main__":
    main()
