"""aiokafka against a real `moldau server`: admin, produce, consume, offsets, auto-create."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from .support import (
    BIG_TOPIC_CONFIG,
    CLIENT_MAX_BYTES,
    CODECS,
    DEADLINE_S,
    PARTITIONS,
    Record,
    assert_same_records,
    check_acknowledged,
    count_by_partition,
    now_ms,
    placed,
    record_mix,
    unique_topic,
)

# aiokafka's own test suite assumes auto-created topics get 2 partitions.
AUTO_CREATE_PARTITIONS = 2


@pytest.fixture(scope="module")
def server(module_server_factory):
    return module_server_factory(num_partitions=str(AUTO_CREATE_PARTITIONS))


async def create_topic(bootstrap: str, topic: str, *, partitions: int, configs=None) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))]
        )
        errors = [e for e in response.to_object()["topic_errors"] if e["error_code"] != 0]
        assert not errors, f"CreateTopics failed: {errors}"
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, records: Sequence[Record], **config: Any
) -> list[Record]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_request_size=CLIENT_MAX_BYTES, linger_ms=20, **config
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=record.value,
                key=record.key,
                partition=record.partition,
                timestamp_ms=record.timestamp_ms,
                headers=list(record.headers) or None,
            )
            for record in records
        ]
        results = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
    finally:
        await producer.stop()
    acknowledged = [
        placed(record, partition=result.partition, offset=result.offset)
        for record, result in zip(records, results, strict=True)
    ]
    check_acknowledged(acknowledged)
    return acknowledged


def new_consumer(bootstrap: str, **config: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=CLIENT_MAX_BYTES,
        max_partition_fetch_bytes=CLIENT_MAX_BYTES,
        **config,
    )


async def consume(
    bootstrap: str, topic: str, starts: dict[int, int | None], expected: dict[int, int]
) -> list[Record]:
    """Read from each partition's start (None: the beginning) until the expected counts arrive
    and the position reaches the end offset."""
    consumer = new_consumer(bootstrap)
    await consumer.start()
    received: list[Record] = []
    try:
        partitions = [TopicPartition(topic, p) for p in starts]
        consumer.assign(partitions)
        for tp in partitions:
            if starts[tp.partition] is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, starts[tp.partition])
        end_offsets = await consumer.end_offsets(partitions)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            counts = count_by_partition(received)
            positions = {tp: await consumer.position(tp) for tp in partitions}
            if all(counts.get(p, 0) >= n for p, n in expected.items()) and all(
                positions[tp] >= end_offsets[tp] for tp in partitions
            ):
                break
            batches = await consumer.getmany(timeout_ms=200)
            for batch in batches.values():
                for message in batch:
                    received.append(
                        Record(
                            key=message.key,
                            value=message.value,
                            headers=tuple(message.headers),
                            timestamp_ms=message.timestamp,
                            partition=message.partition,
                            offset=message.offset,
                        )
                    )
    finally:
        await consumer.stop()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_for_byte(server, codec):
    async def scenario():
        topic = unique_topic(f"aiokafka-{codec}")
        await create_topic(
            server.bootstrap_servers, topic, partitions=PARTITIONS, configs=BIG_TOPIC_CONFIG
        )
        sent = await produce(
            server.bootstrap_servers,
            topic,
            record_mix(seed=40 + CODECS.index(codec)),
            compression_type=None if codec == "none" else codec,
        )
        consumed = await consume(
            server.bootstrap_servers,
            topic,
            dict.fromkeys(range(PARTITIONS)),
            count_by_partition(sent),
        )
        assert_same_records(sent, consumed)

    asyncio.run(scenario())


def test_idempotent_producer_records_arrive_once(server):
    async def scenario():
        topic = unique_topic("aiokafka-idempotent")
        await create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
        sent = await produce(
            server.bootstrap_servers, topic, record_mix(seed=50, big=False), enable_idempotence=True
        )
        consumed = await consume(
            server.bootstrap_servers,
            topic,
            dict.fromkeys(range(PARTITIONS)),
            count_by_partition(sent),
        )
        assert_same_records(sent, consumed)

    asyncio.run(scenario())


def test_default_config_auto_creates_topic_with_num_partitions(server):
    async def scenario():
        topic = unique_topic("aiokafka-auto")
        records = [
            Record(key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=now_ms()) for i in range(6)
        ]
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap_servers)  # all defaults
        await producer.start()
        try:
            results = [
                await producer.send_and_wait(
                    topic, value=r.value, key=r.key, timestamp_ms=r.timestamp_ms
                )
                for r in records
            ]
            assert await producer.partitions_for(topic) == set(range(AUTO_CREATE_PARTITIONS))
        finally:
            await producer.stop()
        sent = [
            placed(r, partition=m.partition, offset=m.offset)
            for r, m in zip(records, results, strict=True)
        ]
        check_acknowledged(sent)
        consumed = await consume(
            server.bootstrap_servers,
            topic,
            dict.fromkeys(range(AUTO_CREATE_PARTITIONS)),
            count_by_partition(sent),
        )
        assert_same_records(sent, consumed)

    asyncio.run(scenario())


def test_consume_from_given_offsets_returns_the_rest_of_each_partition(server):
    async def scenario():
        topic = unique_topic("aiokafka-offsets")
        await create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
        sent = await produce(server.bootstrap_servers, topic, record_mix(seed=51, big=False))
        starts = {0: 4, 1: 1, 2: 0}
        expected = [r for r in sent if r.offset >= starts[r.partition]]
        consumed = await consume(
            server.bootstrap_servers, topic, starts, count_by_partition(expected)
        )
        assert_same_records(expected, consumed)

    asyncio.run(scenario())


def test_offsets_for_times_and_beginning_and_end_offsets(server):
    async def scenario():
        topic = unique_topic("aiokafka-times")
        await create_topic(server.bootstrap_servers, topic, partitions=2)
        base = now_ms() - 86_400_000
        records = [
            Record(key=b"t", value=b"at %d" % i, timestamp_ms=base + 10 * i, partition=0)
            for i in range(6)
        ]
        sent = await produce(server.bootstrap_servers, topic, records)
        assert [r.offset for r in sent] == list(range(6))

        consumer = new_consumer(server.bootstrap_servers)
        await consumer.start()
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        try:
            found = await consumer.offsets_for_times({tp0: base + 15, tp1: base})
            assert found[tp0] is not None
            assert (found[tp0].offset, found[tp0].timestamp) == (2, base + 20)
            assert found[tp1] is None
            assert (await consumer.offsets_for_times({tp0: base + 51}))[tp0] is None
            assert await consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await consumer.end_offsets([tp0, tp1]) == {tp0: 6, tp1: 0}
        finally:
            await consumer.stop()

        consumed = await consume(server.bootstrap_servers, topic, {0: 2}, {0: 4})
        assert_same_records(sent[2:], consumed)

    asyncio.run(scenario())
