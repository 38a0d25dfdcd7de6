"""Consume throughput from the page cache over a ~1 GB topic, and large fetches against `sendfile`.

    .venv/bin/python bench/consume.py [--megabytes 1000] [--size 100]

Fills a one-partition topic with `--megabytes` of `--size`-byte records (librdkafka, 1 MB
batches), then drains it from the beginning with C consumers: kcat (`-f '%o\n'`, one line per
record) and, when built, librdkafka's `rdkafka_performance -C`. Then a raw Fetch client in this
process asks for 32 MB per request and only walks batch headers, so the broker's fetch path is
the bottleneck; it is compared with `os.sendfile` of the same segment files to the same receive
loop (the zero-copy ceiling), measured right after. Broker CPU comes from /proc: a zero-copy
drain costs the broker little CPU per byte. RSS is printed before and after, to show it does not
grow with the topic.
"""

from __future__ import annotations

import argparse
import glob
import os
import socket
import struct
import subprocess
import time

import ceilings
from _harness import Broker, children_cpu_seconds, create_topic, header, run_child
from produce import rdkafka_performance

from moldau.protocol.adapter import encode_request

_FETCH_HEAD = struct.Struct(">iiihi")  # correlation id, throttle, error, session id, topics
_PARTITION = struct.Struct(">iihqqqi")  # count, index, error, hw, lso, log start, aborted count
_BATCH_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    while view:
        count = sock.recv_into(view)
        if not count:
            raise ConnectionError("broker closed the connection")
        view = view[count:]


def fetch_drain(port: int, topic: str, end_offset: int, fetch_bytes: int = 32 << 20) -> int:
    """Fetch partition 0 from offset 0 to `end_offset` (Fetch v11); return the bytes received."""
    buffer = bytearray(fetch_bytes + (2 << 20))
    view = memoryview(buffer)
    size_buffer = bytearray(4)
    received = 0
    offset = 0
    correlation_id = 0
    name = topic.encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while offset < end_offset:
            correlation_id += 1
            sock.sendall(encode_request(1, 11, correlation_id, "bench", {
                "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": fetch_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                    "log_start_offset": -1, "partition_max_bytes": fetch_bytes}]}],
                "forgotten_topics_data": [], "rack_id": "",
            }))  # fmt: skip
            _recv_exactly(sock, memoryview(size_buffer))
            (size,) = struct.unpack(">i", size_buffer)
            _recv_exactly(sock, view[:size])
            received += size + 4
            # header, one topic (its name), one partition, then the records
            position = _FETCH_HEAD.size + 2 + len(name)
            fields = _PARTITION.unpack_from(buffer, position)
            if fields[2]:
                raise RuntimeError(f"fetch error {fields[2]}")
            position += _PARTITION.size + 16 * max(fields[6], 0) + 4  # + preferred read replica
            (records_size,) = struct.unpack_from(">i", buffer, position)
            position += 4
            end = position + records_size
            while position + 27 <= end:
                base_offset, length = _BATCH_LENGTH.unpack_from(buffer, position)
                if position + 12 + length > end:
                    break  # a partial batch at the end of the response
                (delta,) = _LAST_OFFSET_DELTA.unpack_from(buffer, position + 23)
                offset = base_offset + delta + 1
                position += 12 + length
    return received


def fill_topic(broker: Broker, records: int, size: int) -> float:
    """Produce `records` records to partition 0 of `bench`; return records/s."""
    tool = rdkafka_performance()
    start = time.perf_counter()
    if tool:
        subprocess.run(
            [tool, "-P", "-t", "bench", "-p", "0", "-b", broker.bootstrap, "-s", str(size),
             "-c", str(records), "-a", "1", "-q", "-X", "linger.ms=50",
             "-X", "batch.num.messages=1000000", "-X", "queue.buffering.max.messages=1000000"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    else:
        run_child("_producer.py", [broker.bootstrap, "bench", "--records", str(records), "--size",
                                   str(size), "--acks", "1", "--profile", "large"], broker)  # fmt: skip
    return records / (time.perf_counter() - start)


def timed(broker: Broker, action: object) -> tuple[object, float, float, float]:
    """Run `action()`; return (its result, seconds, broker cores, child-process cores)."""
    broker_before, children_before = broker.cpu_seconds(), children_cpu_seconds()
    start = time.perf_counter()
    result = action()  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    return (
        result,
        elapsed,
        (broker.cpu_seconds() - broker_before) / elapsed,
        (children_cpu_seconds() - children_before) / elapsed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    records = args.megabytes * 1_000_000 // args.size
    with Broker() as broker:
        idle_rss = broker.rss_bytes()
        create_topic(broker.bootstrap, "bench")
        rate = fill_topic(broker, records, args.size)
        segments = sorted(glob.glob(os.path.join(broker.data_dir, "bench-0", "*.log")))
        log_bytes = sum(os.path.getsize(s) for s in segments)
        header(f"consume, {records:,} records of {args.size} B, {log_bytes / 1e6:,.0f} MB on disk")
        print(f"filled at {rate:,.0f} records/s; broker RSS idle {idle_rss / 1e6:.0f} MB, "
              f"after filling {broker.rss_bytes() / 1e6:.0f} MB")  # fmt: skip
        print("consumer                 | records/s      MB/s | broker cores  consumer cores")

        def kcat() -> int:
            output = subprocess.run(
                ["kcat", "-C", "-b", broker.bootstrap, "-t", "bench", "-p", "0", "-o", "beginning",
                 "-e", "-q", "-f", "%o\n"],
                check=True, capture_output=True, timeout=600,
            ).stdout  # fmt: skip
            return output.count(b"\n")

        consumed, elapsed, broker_cores, child_cores = timed(broker, kcat)
        # the generator's warm-up records come on top of `records`
        assert consumed >= records, f"kcat saw {consumed} of {records} records"
        kcat_rate = records / elapsed
        print(f"kcat                     | {kcat_rate:9,.0f} {records * args.size / elapsed / 1e6:9,.1f}"
              f" | {broker_cores:12.2f} {child_cores:15.2f}")  # fmt: skip
        tool = rdkafka_performance()
        if tool:

            def perf_consumer() -> None:
                subprocess.run(
                    [tool, "-C", "-t", "bench", "-p", "0", "-b", broker.bootstrap, "-o",
                     "beginning", "-c", str(records), "-q"],
                    check=True, capture_output=True, timeout=600,
                )  # fmt: skip

            _, elapsed, broker_cores, child_cores = timed(broker, perf_consumer)
            print(f"rdkafka_performance -C   | {records / elapsed:9,.0f} "
                  f"{records * args.size / elapsed / 1e6:9,.1f} | {broker_cores:12.2f} "
                  f"{child_cores:15.2f}")  # fmt: skip
        # Raw fetches and the sendfile ceiling interleaved, best of 3 each (the machine is noisy).
        fetch_mb_s = sendfile_mb_s = 0.0
        for _ in range(3):
            received, elapsed, cores, _ = timed(
                broker, lambda: fetch_drain(broker.port, "bench", records)
            )
            if received / elapsed / 1e6 > fetch_mb_s:
                fetch_mb_s, fetch_rate, broker_cores = (
                    received / elapsed / 1e6,
                    records / elapsed,
                    cores,
                )
            sendfile_mb_s = max(
                sendfile_mb_s, ceilings.sendfile(segments[0], log_bytes, receive_buffer=32 << 20)
            )
        print(f"raw Fetch, 32 MB fetches | {fetch_rate:9,.0f} {fetch_mb_s:9,.1f} | "
              f"{broker_cores:12.2f}  (MB/s of response bytes, best of 3)")  # fmt: skip
        print(f"broker RSS after draining {broker.rss_bytes() / 1e6:.0f} MB")
        header("same-run ceilings and ratios")
        print(f"sendfile of the segment files: {sendfile_mb_s:,.0f} MB/s; "
              f"loopback TCP {ceilings.loopback_tcp():,.0f} MB/s")  # fmt: skip
        print(f"raw Fetch / sendfile ceiling: {fetch_mb_s / sendfile_mb_s:.2f}  (target 0.80)")
        print(f"kcat records/s / 1.5 M target: {kcat_rate / 1.5e6:.2f}")


if __name__ == "__main__":
    main()
