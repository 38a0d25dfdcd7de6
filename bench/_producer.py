"""Load generator: confluent-kafka (librdkafka) producers in this process, one JSON line of results.

    python bench/_producer.py BOOTSTRAP TOPIC --records N --size BYTES --acks 1|all
        [--profile default|large] [--producers K] [--random-partition] [--enqueue-only]

`default` is librdkafka's own batching with linger.ms=5; `large` lingers 50 ms and lets a batch
grow to message.max.bytes (1 MB); `per-request` sends one record per batch with no linger, so
records/s is about the broker's produce requests/s (librdkafka still packs several partitions'
batches, here just one, into a request, and pipelines requests). `--producers K` round-robins records over K producer instances
(K connections). `--enqueue-only` measures the generator's own ceiling: records are queued in
librdkafka with no broker to send to (BOOTSTRAP should be a closed port), then purged.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from confluent_kafka import Producer

PROFILES = {
    "default": {"linger.ms": 5},
    "large": {"linger.ms": 50, "batch.size": 1_000_000, "batch.num.messages": 1_000_000},
    "per-request": {"linger.ms": 0, "batch.num.messages": 1},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default")
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--random-partition", action="store_true")
    parser.add_argument("--enqueue-only", action="store_true")
    args = parser.parse_args()
    config = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "queue.buffering.max.messages": max(2_000_000, args.records // args.producers + 1),
        "queue.buffering.max.kbytes": 2_000_000,
        **PROFILES[args.profile],
    }
    if args.random_partition:
        config.update({"partitioner": "random", "sticky.partitioning.linger.ms": 0})
    producers = [Producer(config) for _ in range(args.producers)]
    value = b"x" * args.size
    topic = args.topic
    errors = 0

    def delivered(error: object, _message: object) -> None:
        nonlocal errors
        if error is not None:
            errors += 1

    if not args.enqueue_only:
        # Fetch metadata first so the timed loop does not include the first connection.
        for producer in producers:
            producer.produce(topic, value, on_delivery=delivered)
            producer.flush(60)
    start = time.perf_counter()
    if len(producers) == 1:
        produce = producers[0].produce
        poll = producers[0].poll
        for _ in range(args.records):
            try:
                produce(topic, value)
            except BufferError:
                poll(0.005)
                produce(topic, value)
    else:
        for index in range(args.records):
            producer = producers[index % len(producers)]
            try:
                producer.produce(topic, value)
            except BufferError:
                producer.poll(0.005)
                producer.produce(topic, value)
    enqueued_s = time.perf_counter() - start
    if args.enqueue_only:
        for producer in producers:
            producer.purge()
    else:
        for producer in producers:
            # A delivery report per producer tells whether the run had errors.
            producer.produce(topic, value, on_delivery=delivered)
            remaining = producer.flush(120)
            if remaining:
                errors += remaining
    elapsed_s = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "records": args.records,
        "bytes": args.records * args.size,
        "elapsed_s": elapsed_s,
        "enqueued_s": enqueued_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "errors": errors,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
