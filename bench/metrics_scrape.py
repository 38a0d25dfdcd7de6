"""How long a scrape of `/metrics` takes on a node with many partitions, and how long it holds
the node's other requests.

    .venv/bin/python bench/metrics_scrape.py [--partitions 2000] [--scrapes 5]

Starts a single-node `moldau server` with its HTTP endpoints on an ephemeral port, creates one
topic of `--partitions` one-replica partitions, writes 10 records to each and commits an offset
for each in one group (so every partition has a log, an offset and a lag series). Then, for
each scrape, a thread sends ApiVersions on the Kafka listener every 2 ms: the longest round trip
while the scrape runs is how long the node's event loop was held; the same is measured for
1.5 s without a scrape first. To measure another checkout, set PYTHONPATH to it.
"""

from __future__ import annotations

import argparse
import http.client
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

from _harness import Broker, header
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HTTP_LINE = re.compile(r"Moldau HTTP: http://(\S+):(\d+)")
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def longest_api_versions(host: str, port: int, stop: threading.Event, longest: list[float]) -> None:
    with socket.create_connection((host, port)) as sock:
        frame = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
        while not stop.is_set():
            started = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", sock.recv(4))[0]
            received = 0
            while received < size:
                received += len(sock.recv(size - received))
            longest[0] = max(longest[0], time.perf_counter() - started)
            time.sleep(0.002)


def while_probing(bootstrap: str, action: Callable[[], None]) -> tuple[float, float]:
    """(seconds `action()` took, the longest ApiVersions round trip meanwhile)."""
    host, port = bootstrap.rsplit(":", 1)
    stop, longest = threading.Event(), [0.0]
    probe = threading.Thread(target=longest_api_versions, args=(host, int(port), stop, longest))
    probe.start()
    time.sleep(0.2)
    started = time.perf_counter()
    action()
    took = time.perf_counter() - started
    time.sleep(0.1)
    stop.set()
    probe.join()
    return took, longest[0]


def fill(bootstrap: str, partitions: int) -> None:
    """Topic `wide`: 10 records in each partition, and group `bench`'s offset 5 in each (the
    clients are gone when this returns)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(300)
    time.sleep(2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(10 * partitions):
        producer.produce("wide", value=b"x" * 50, partition=index % partitions)
    producer.flush(120)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    offsets = [TopicPartition("wide", partition, 5) for partition in range(partitions)]
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--scrapes", type=int, default=5)
    args = parser.parse_args()
    with Broker("http.listeners=http://127.0.0.1:0", "schema.registry.listeners=") as broker:
        found = next(m for line in broker.startup_lines if (m := HTTP_LINE.search(line)))
        http_host, http_port = found.group(1), int(found.group(2))
        fill(broker.bootstrap, args.partitions)

        header(f"/metrics of {args.partitions} partitions")
        _, quiet = while_probing(broker.bootstrap, lambda: time.sleep(1.5))
        print(f"no scrape: longest ApiVersions over 1.5 s {quiet * 1000:.0f} ms")
        body = b""

        def scrape() -> None:
            nonlocal body
            connection = http.client.HTTPConnection(http_host, http_port, timeout=60)
            connection.request("GET", "/metrics")
            body = connection.getresponse().read()
            connection.close()

        for _ in range(args.scrapes):
            took, longest = while_probing(broker.bootstrap, scrape)
            lines = body.count(b"\n")
            print(
                f"scrape {took * 1000:.0f} ms ({lines} lines, {len(body) // 1024} KiB); "
                f"longest ApiVersions meanwhile {longest * 1000:.0f} ms",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
