"""Produce/consume round trip against a freshly started `moldau server` (run by run-example.sh).

Starts the server as a child process with its data in a temporary directory and a listener on an
ephemeral loopback port, creates a topic, produces a few records with confluent-kafka, consumes
them from the beginning, prints what came back and stops the server with SIGTERM.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READY_LINE = re.compile(r"Moldau ready: bootstrap\.servers=(\S+)")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
TOPIC = "example"
RECORDS = [(b"greeting", b"hello, Moldau"), (None, b"a record without a key"), (b"last", b"bye")]


def start_server(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        "-m",
        "moldau",
        "server",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={data_dir}",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert process.stdout is not None
    found: list[str] = []
    ready = threading.Event()

    def follow_output() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = READY_LINE.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
            elif not found:
                print(f"  server: {line.rstrip()}")
        ready.set()

    threading.Thread(target=follow_output, daemon=True).start()
    if not ready.wait(START_TIMEOUT_S) or not found:
        process.kill()
        process.wait()
        raise SystemExit("moldau server did not become ready (see its output above)")
    return process, found[0]


def stop_server(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise SystemExit(
            f"moldau server did not stop within {STOP_TIMEOUT_S:.0f}s of SIGTERM"
        ) from None


def round_trip(bootstrap: str) -> list[tuple[bytes | None, bytes | None, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
    futures[TOPIC].result(timeout=30)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in RECORDS:
        producer.produce(TOPIC, key=key, value=value, partition=0)
    if producer.flush(30) != 0:
        raise SystemExit("producer could not deliver every record within 30s")

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "example", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    received: list[tuple[bytes | None, bytes | None, int]] = []
    deadline = time.monotonic() + 30
    try:
        while len(received) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            received.append((message.key(), message.value(), message.offset()))
    finally:
        consumer.close()
    return received


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="moldau-example-") as temporary:
        data_dir = Path(temporary) / "data"
        print(f"starting moldau server with data in {data_dir}")
        process, bootstrap = start_server(data_dir)
        print(f"server ready at {bootstrap}")
        try:
            received = round_trip(bootstrap)
        finally:
            exit_code = stop_server(process)
        print(f"consumed {len(received)} of {len(RECORDS)} records from {TOPIC!r}:")
        for key, value, offset in received:
            print(f"  offset {offset}: key={key!r} value={value!r}")
        print(f"server stopped with exit code {exit_code}")
        ok = [(k, v) for k, v, _ in received] == RECORDS and exit_code == 0
        print("round trip OK" if ok else "round trip FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
