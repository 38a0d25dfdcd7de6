"""Scale on one node: idle RSS, 1,000 partitions, 1,000 idle connections next to 10 busy producers.

    .venv/bin/python bench/scale.py [--seconds 3] [--partitions 1000] [--idle 1000]

Steps, on one fresh `moldau server`: RSS when idle; RSS after creating a topic with
`--partitions` partitions and the time that took; produce throughput of 100-byte records spread
over all of them (confluent-kafka, random partitioner, linger.ms=5, so every request carries
many small batches); then 10 producer instances (10 connections, one process) on a 10-partition
topic, alone and again with `--idle` idle connections open (each has done one ApiVersions
round trip), with broker RSS and the memory each idle connection costs.
"""

from __future__ import annotations

import argparse
import socket
import struct
import time

from _harness import Broker, create_topic, header, run_child

from moldau.protocol.adapter import encode_request


def open_idle_connections(port: int, count: int) -> list[socket.socket]:
    """Connections that each did one ApiVersions round trip and then stay silent."""
    connections = []
    request = encode_request(18, 0, 1, "idle", {})
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port))
        connection.sendall(request)
        (size,) = struct.unpack(">i", connection.recv(4, socket.MSG_WAITALL))
        connection.recv(size, socket.MSG_WAITALL)
        connections.append(connection)
    return connections


def produce(broker: Broker, topic: str, records: int, *extra: str) -> tuple[float, float]:
    """(records/s, broker cores) of 100-byte records from a confluent-kafka process."""
    run = run_child(
        "_producer.py",
        [broker.bootstrap, topic, "--records", str(records), "--size", "100", "--acks", "1", *extra],
        broker,
    )  # fmt: skip
    return records / run.result["elapsed_s"], run.broker_cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--idle", type=int, default=1000)
    args = parser.parse_args()
    records = int(args.seconds * 800_000)
    with Broker() as broker:
        time.sleep(2)
        header("scale, one node")
        idle_rss = broker.rss_bytes()
        print(f"idle broker RSS: {idle_rss / 1e6:.0f} MB (target ≤ 100 MB)")

        start = time.perf_counter()
        create_topic(broker.bootstrap, "wide", args.partitions)
        created_s = time.perf_counter() - start
        print(f"{args.partitions} partitions created in {created_s:.1f} s; "
              f"RSS {broker.rss_bytes() / 1e6:.0f} MB")  # fmt: skip
        rate, cores = produce(broker, "wide", records, "--random-partition")
        print(f"produce over {args.partitions} partitions: {rate:,.0f} records/s, "
              f"{rate * 100 / 1e6:.1f} MB/s, broker {cores:.2f} cores; "
              f"RSS {broker.rss_bytes() / 1e6:.0f} MB")  # fmt: skip

        create_topic(broker.bootstrap, "busy", 10)
        alone, cores_alone = produce(broker, "busy", records, "--producers", "10")
        print(f"10 busy producers alone: {alone:,.0f} records/s, broker {cores_alone:.2f} cores; "
              f"RSS {broker.rss_bytes() / 1e6:.0f} MB")  # fmt: skip
        before = broker.rss_bytes()
        connections = open_idle_connections(broker.port, args.idle)
        time.sleep(1)
        after = broker.rss_bytes()
        print(f"{args.idle} idle connections: RSS {after / 1e6:.0f} MB, "
              f"{(after - before) / args.idle / 1024:.1f} KB per connection")  # fmt: skip
        try:
            busy, cores_busy = produce(broker, "busy", records, "--producers", "10")
            print(f"10 busy producers + {args.idle} idle connections: {busy:,.0f} records/s, "
                  f"broker {cores_busy:.2f} cores; RSS {broker.rss_bytes() / 1e6:.0f} MB")  # fmt: skip
        finally:
            for connection in connections:
                connection.close()
        header("ratios")
        print(f"busy throughput with idle connections / without: {busy / alone:.2f}")
        print(f"idle RSS / 100 MB target: {idle_rss / 100e6:.2f}")


if __name__ == "__main__":
    main()
