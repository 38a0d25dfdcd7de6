"""Produce and consume throughput over TLS and SASL_SSL next to plaintext, on one broker in the
same run.

    .venv/bin/python bench/tls.py [--records N] [--size BYTES] [--rounds R]

One `moldau server` listens on PLAINTEXT, SSL and SASL_SSL (PEM key, TLS 1.3, no client
certificate asked; certificates made by tests/certificates.py; SASL_SSL logs in with PLAIN, whose
cost is one exchange per connection). Each round produces N records with
confluent-kafka (acks=1, linger.ms=5) to a fresh topic through each listener, then consumes them
back from the beginning, the three alternating so that the machine's load falls on each.
Prints the best round of each (records/s, MB/s of values, broker cores) and the SSL/PLAINTEXT
and SASL_SSL/PLAINTEXT ratios. TLS loses zero copy (fetch answers are read and encrypted), as Kafka's does.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _harness import Broker, create_topic
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.certificates import make_certificates


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def produce(bootstrap: str, settings: dict[str, str], topic: str, records: int, size: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
         **settings}
    )  # fmt: skip
    value = b"x" * size
    started = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    return time.monotonic() - started


def consume(bootstrap: str, settings: dict[str, str], topic: str, records: int) -> float:
    """From assignment (no group join) to the last record."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit":
         False, "fetch.max.bytes": 52_428_800, **settings}
    )  # fmt: skip
    started = time.monotonic()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    while count < records:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is None:
                count += 1
    elapsed = time.monotonic() - started
    consumer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    certificates = make_certificates(Path(tempfile.mkdtemp(prefix="moldau-bench-tls-")))
    plain_port, ssl_port, sasl_port = free_port(), free_port(), free_port()
    overrides = (
        f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port},"
        f"SASL_SSL://127.0.0.1:{sasl_port}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certificates.path('server.pem')}",
        "sasl.enabled.mechanisms=PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_bench="bench-secret";',
    )
    tls = {"ssl.ca.location": certificates.path("ca.pem")}
    cases = {
        "PLAINTEXT": (f"127.0.0.1:{plain_port}", {}),
        "SSL": (f"127.0.0.1:{ssl_port}", {"security.protocol": "SSL", **tls}),
        "SASL_SSL": (
            f"127.0.0.1:{sasl_port}",
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
                **tls,
            },
        ),
    }
    megabytes = args.records * args.size / 1e6
    best: dict[tuple[str, str], tuple[float, float]] = {}
    with Broker(*overrides) as broker:
        for round_number in range(args.rounds):
            for name, (bootstrap, settings) in cases.items():
                topic = f"bench-{name.lower()}-{round_number}"
                create_topic(broker.bootstrap, topic)
                for what in ("produce", "consume"):
                    cpu_before = broker.cpu_seconds()
                    if what == "produce":
                        elapsed = produce(bootstrap, settings, topic, args.records, args.size)
                    else:
                        elapsed = consume(bootstrap, settings, topic, args.records)
                    cores = (broker.cpu_seconds() - cpu_before) / elapsed
                    print(f"round {round_number + 1} {name:9} {what}: {args.records / elapsed:,.0f}"
                          f" records/s, {megabytes / elapsed:,.1f} MB/s, broker {cores:.2f} cores",
                          flush=True)  # fmt: skip
                    key = (name, what)
                    if key not in best or elapsed < best[key][0]:
                        best[key] = (elapsed, cores)
    print(f"\n{args.records:,} records of {args.size} B, best of {args.rounds} rounds:")
    print(f"{'':10} {'':8} | {'records/s':>10} {'MB/s':>8} | broker cores")
    for (name, what), (elapsed, cores) in sorted(best.items(), key=lambda item: item[0][::-1]):
        print(f"{name:10} {what:8} | {args.records / elapsed:10,.0f} {megabytes / elapsed:8,.1f}"
              f" | {cores:.2f}")  # fmt: skip
    for secured in ("SSL", "SASL_SSL"):
        for what in ("produce", "consume"):
            ratio = best[("PLAINTEXT", what)][0] / best[(secured, what)][0]
            print(f"{secured} / PLAINTEXT {what}: {ratio:.2f}")


if __name__ == "__main__":
    main()
