"""Latency load: a paced producer or a timing consumer (confluent-kafka), one JSON line of results.

    python bench/_latency.py produce BOOTSTRAP TOPIC --rate R --seconds S --acks 1|all
                             [--pacing kafka|record]
    python bench/_latency.py consume BOOTSTRAP TOPIC --records N

Each record's value starts with the producer's CLOCK_MONOTONIC time in ns (the clock is shared by
all processes of the machine). The producer paces records at R per second (linger.ms=0, Nagle
off) and reports the produce → delivery-report latency; the consumer, started first at the end
of the partition, reports produce → consume latency. Both in ms, sorted, as JSON lists.

Pacing `kafka` sleeps the way Kafka's own producer performance tool does (its throughput
throttler): only once 2 ms of schedule is owed, so at 10k records/s records leave in groups of
20 every 2 ms. Pacing `record` sleeps before every record (10k sleeps a second at 10k records/s).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

_NS = struct.Struct(">q")


KAFKA_MIN_SLEEP_NS = 2_000_000


def produce(bootstrap: str, topic: str, rate: int, seconds: float, acks: str, pacing: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "socket.nagle.disable": True})  # fmt: skip
    acked: list[float] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            sent = _NS.unpack_from(message.value())[0]  # type: ignore[attr-defined]
            acked.append((time.monotonic_ns() - sent) / 1e6)

    padding = b"x" * 92  # 100-byte values
    producer.produce(topic, _NS.pack(0) + b"w" * 92)  # warm-up: metadata, connection
    producer.flush(30)
    # A delivery report is timed when a poll() serves it: a thread of its own serves them as they
    # arrive, so the pacing loop's sleeps do not add to produce → ack.
    done = threading.Event()

    def serve_reports() -> None:
        while not done.is_set():
            producer.poll(0.1)

    reporter = threading.Thread(target=serve_reports)
    reporter.start()
    total = int(rate * seconds)
    start = time.monotonic_ns()
    interval_ns = 1e9 / rate
    group = max(1, int(KAFKA_MIN_SLEEP_NS // interval_ns)) if pacing == "kafka" else 1
    for index in range(total):
        due = start + int(index // group * group * interval_ns)
        now = time.monotonic_ns()
        if now < due:
            # Sleep rather than spin: a generator burning a core to pace itself takes it from
            # the broker on a 2-core machine. Oversleeping is caught up by the absolute schedule.
            time.sleep((due - now) / 1e9)
            now = time.monotonic_ns()
        producer.produce(topic, _NS.pack(now) + padding, on_delivery=delivered)
    producer.flush(60)
    done.set()
    reporter.join()
    print(json.dumps({"records": total, "acked_ms": sorted(acked)}))


def consume(bootstrap: str, topic: str, records: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "socket.nagle.disable": True,
                         "isolation.level": "read_uncommitted"})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)
    print("ready", file=sys.stderr, flush=True)
    latencies = []
    deadline = time.monotonic() + 120
    while len(latencies) < records and time.monotonic() < deadline:
        # poll() returns as soon as one record is there (consume(n, t) would wait for n records)
        message = consumer.poll(0.1)
        if message is not None and message.error() is None and message.value()[8:9] != b"w":
            now = time.monotonic_ns()
            latencies.append((now - _NS.unpack_from(message.value())[0]) / 1e6)
    consumer.close()
    print(json.dumps({"records": len(latencies), "consumed_ms": sorted(latencies)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--pacing", choices=["kafka", "record"], default="kafka")
    parser.add_argument("--records", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "produce":
        produce(args.bootstrap, args.topic, args.rate, args.seconds, args.acks, args.pacing)
    else:
        consume(args.bootstrap, args.topic, args.records)


if __name__ == "__main__":
    main()
