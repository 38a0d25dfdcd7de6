"""Exactly-once consume-transform-produce: a transformer process (confluent-kafka consumer plus
transactional producer, `send_offsets_to_transaction`) is SIGKILLed at random moments and
restarted; in the end every input record is in the output exactly once, in input order."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Producer

from .rdkafka import consume, create_topic
from .support import DEADLINE_S, unique_topic

PARTITIONS = 3
INPUT_RECORDS = 900
KILLS = 22

TRANSFORMER = r"""
import sys
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

bootstrap, source, sink, group, transactional_id, partitions = sys.argv[1:7]
partitions = int(partitions)
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
})
producer = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": transactional_id,
    "transaction.timeout.ms": 60000,
    "linger.ms": 2,
})
producer.init_transactions(30)
consumer.assign([TopicPartition(source, p) for p in range(partitions)])
print("ready", flush=True)
at_end = set()
while len(at_end) < partitions:
    messages = consumer.consume(50, 0.5)
    batch = []
    for message in messages:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
                continue
            raise SystemExit(f"consume failed: {error}")
        at_end.discard(message.partition())
        batch.append(message)
    if not batch:
        continue
    producer.begin_transaction()
    for message in batch:
        value = b"%d:%d:" % (message.partition(), message.offset()) + message.value()
        producer.produce(sink, key=message.key(), value=value, partition=message.partition())
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    print("committed", len(batch), flush=True)
print("done", flush=True)
consumer.close()
"""


def test_consume_transform_produce_killed_and_restarted_is_exactly_once(
    start_server: Any, tmp_path: Path
) -> None:
    server = start_server(group_initial_rebalance_delay_ms="0")
    bootstrap = server.bootstrap_servers
    source, sink = unique_topic("eos-in"), unique_topic("eos-out")
    create_topic(bootstrap, source, partitions=PARTITIONS)
    create_topic(bootstrap, sink, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    inputs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for index in range(INPUT_RECORDS):
        partition = index % PARTITIONS
        value = b"record-%05d" % index
        producer.produce(source, key=b"%d" % index, value=value, partition=partition)
        inputs[partition].append(value)
    assert producer.flush(DEADLINE_S) == 0

    script = tmp_path / "transformer.py"
    script.write_text(TRANSFORMER)
    arguments = [sys.executable, str(script), bootstrap, source, sink, "eos-group", "eos-tx"]
    arguments.append(str(PARTITIONS))
    rng = random.Random(47)
    kills = 0
    finished = False
    while not finished:
        process = subprocess.Popen(
            arguments, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.strip() == "ready", f"transformer failed to start: {first!r}"
            if kills < KILLS:
                # Kill after a random number of committed transactions (0 = right after start),
                # some of them in the middle of the next transaction.
                for _ in range(rng.randrange(3)):
                    line = process.stdout.readline()
                    if not line or line.strip() == "done":
                        break
                time.sleep(rng.uniform(0, 0.05))  # a random moment, not a synchronization
                process.send_signal(signal.SIGKILL)
                process.wait(DEADLINE_S)
                kills += 1
                continue
            output = process.stdout.read()
            assert process.wait(DEADLINE_S * 2) == 0
            assert output.rstrip().endswith("done")
            finished = True
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    seen = consume(
        bootstrap,
        sink,
        dict.fromkeys(range(PARTITIONS), OFFSET_BEGINNING),
        {p: len(values) for p, values in inputs.items()},
        **{"isolation.level": "read_committed"},
    )
    outputs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for record in seen:
        assert record.partition is not None and record.value is not None
        partition, _offset, value = record.value.split(b":", 2)
        assert int(partition) == record.partition
        outputs[record.partition].append(value)
    assert outputs == inputs  # every input once, in order: nothing lost, nothing twice
