"""A quick look at broker throughput: librdkafka produce and kcat consume on one node.

Starts `moldau server` on a temporary directory, produces N records of SIZE bytes with
confluent-kafka in a child process (linger 5 ms, 1 MB batches), then drains the topic with kcat.
Prints records/s and MB/s for each and the loopback ceiling measured in the same run. Issue 8's
full suite (latency, acks=all vs fsync ceiling, sendfile ceiling, scale) builds on this.

    .venv/bin/python bench/broker_quick.py --records 1000000 --size 100 --acks 1
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

READY = re.compile(r"bootstrap\.servers=(\S+)")

PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, records, size, acks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                     "batch.size": 1000000, "queue.buffering.max.messages": 2000000})
value = b"x" * size
start = time.perf_counter()
for _ in range(records):
    while True:
        try:
            producer.produce("bench", value)
            break
        except BufferError:
            producer.poll(0.005)
producer.flush(120)
print(time.perf_counter() - start)
"""


def loopback_ceiling(total: int = 1 << 30) -> float:
    """MB/s of a plain TCP copy over loopback between two threads of this process."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    chunk = b"\0" * (1 << 20)

    def sink() -> None:
        connection, _ = server.accept()
        with connection:
            while connection.recv_into(bytearray(1 << 20)):
                pass

    thread = threading.Thread(target=sink)
    thread.start()
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as client:
        sent = 0
        while sent < total:
            client.sendall(chunk)
            sent += len(chunk)
    thread.join()
    server.close()
    return total / (time.perf_counter() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", default="1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            [sys.executable, "-m", "moldau", "server", "--override",
             "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={directory}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            bootstrap = ""
            for line in server.stdout:
                match = READY.search(line)
                if match:
                    bootstrap = match.group(1)
                    break
            produce_s = float(
                subprocess.run(
                    [sys.executable, "-c", PRODUCER, bootstrap, str(args.records),
                     str(args.size), args.acks],
                    check=True, capture_output=True, text=True,
                ).stdout.split()[-1]
            )  # fmt: skip
            start = time.perf_counter()
            consumed = subprocess.run(
                ["kcat", "-C", "-b", bootstrap, "-t", "bench", "-e", "-q", "-o", "beginning",
                 "-f", "%o\n"],
                check=True, capture_output=True,
            ).stdout.count(b"\n")  # fmt: skip
            consume_s = time.perf_counter() - start
        finally:
            server.terminate()
            server.wait(30)
    megabytes = args.records * args.size / 1e6
    print(f"produce acks={args.acks}: {args.records / produce_s:,.0f} records/s, "
          f"{megabytes / produce_s:,.1f} MB/s ({args.size}-byte values)")  # fmt: skip
    print(f"consume (kcat): {consumed / consume_s:,.0f} records/s, "
          f"{consumed * args.size / 1e6 / consume_s:,.1f} MB/s ({consumed} records)")  # fmt: skip
    print(f"loopback TCP ceiling (same run): {loopback_ceiling():,.0f} MB/s")


if __name__ == "__main__":
    main()
