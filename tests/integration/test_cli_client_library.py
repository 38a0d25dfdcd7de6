"""`moldau.client` (the library under the CLI) against a real server, cross-checked with
confluent-kafka: what one writes the other reads byte for byte, for every compression codec."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from moldau.client import (
    OFFSET_BEGINNING,
    AdminClient,
    Consumer,
    KafkaException,
    NewTopic,
    Producer,
    SyncProducer,
    TopicPartition,
)
from moldau.client.errors import ErrorCode
from moldau.client.offsets import EARLIEST, LATEST, MAX_TIMESTAMP

from .support import CODECS, now_ms, unique_topic, wait_until

pytestmark = pytest.mark.timeout(120)

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def _records(
    count: int, base_ms: int
) -> list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]:
    rows = []
    for index in range(count):
        key = None if index % 5 == 0 else b"key-%d" % index
        value = None if index % 7 == 3 else b"value %d " % index * (index % 4 + 1)
        headers = (("i", b"%d" % index), ("empty", b""), ("null", None)) if index % 2 else ()
        rows.append((key, value, headers, base_ms + index))
    return rows


async def _produce_with_moldau(bootstrap: str, topic: str, codec: str, rows: list) -> list[int]:  # type: ignore[type-arg]
    async with Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
    ) as producer:
        futures = [
            producer.produce(topic, value, key, partition=0, headers=headers, timestamp=ts)
            for key, value, headers, ts in rows
        ]
        return [(await f).offset for f in futures]


async def _consume_with_moldau(bootstrap: str, topic: str, count: int) -> list[Row]:
    async with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp], {tp: OFFSET_BEGINNING})
        messages = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(messages) < count and loop.time() < deadline:
            messages += await consumer.consume(count - len(messages), 1.0)
    return [
        (m.offset(), m.key(), m.value(), tuple(m.headers()), m.timestamp()[1]) for m in messages
    ]


def _consume_with_confluent(bootstrap: str, topic: str, count: int) -> list[Row]:
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("confluent"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        rows: list[Row] = []

        def more() -> bool:
            for message in consumer.consume(count - len(rows), 0.5):
                assert message.error() is None, message.error()
                rows.append(
                    (
                        message.offset(),
                        message.key(),
                        message.value(),
                        tuple(message.headers() or ()),
                        message.timestamp()[1],
                    )
                )
            return len(rows) >= count

        wait_until(more, timeout=30, message=f"confluent read {len(rows)} of {count}")
        return rows
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_moldau_producer_to_confluent_consumer(server, codec: str) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic(f"lib-{codec}")
    rows = _records(40, now_ms() - 10_000)

    async def setup() -> list[int]:
        async with AdminClient({"bootstrap.servers": b}) as admin:
            await admin.create_topics([NewTopic(topic, 1)])
        return await _produce_with_moldau(b, topic, codec, rows)

    offsets = asyncio.run(setup())
    assert offsets == list(range(40))
    expected = [(i, *row[:3], row[3]) for i, row in enumerate(rows)]
    assert _consume_with_confluent(b, topic, 40) == expected
    assert asyncio.run(_consume_with_moldau(b, topic, 40)) == expected


def test_confluent_producer_to_moldau_consumer_and_offsets(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("lib-from-confluent")
    base = now_ms() - 50_000
    rows = _records(30, base)
    asyncio.run(_create(b, topic))
    producer = ConfluentProducer({"bootstrap.servers": b, "compression.type": "zstd"})
    for key, value, headers, ts in rows:
        producer.produce(topic, value, key, partition=0, headers=list(headers), timestamp=ts)
    assert producer.flush(30) == 0
    consumed = asyncio.run(_consume_with_moldau(b, topic, 30))
    assert consumed == [(i, *row[:3], row[3]) for i, row in enumerate(rows)]

    async def offsets() -> None:
        async with AdminClient({"bootstrap.servers": b}) as admin:
            tp = TopicPartition(topic, 0)
            assert (await admin.list_offsets({tp: EARLIEST}))[tp].offset == 0
            assert (await admin.list_offsets({tp: LATEST}))[tp].offset == 30
            newest = (await admin.list_offsets({tp: MAX_TIMESTAMP}))[tp]
            assert (newest.offset, newest.timestamp) == (29, base + 29)
            assert (await admin.list_offsets({tp: base + 10}))[tp].offset == 10
            assert await admin.delete_records({tp: 12}) == {tp: 12}
            async with Consumer({"bootstrap.servers": b}) as consumer:
                assert await consumer.get_watermark_offsets(tp) == (12, 30)

    asyncio.run(offsets())


async def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    async with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, partitions)])


def test_group_consumer_commits_what_it_read(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("lib-group")
    group = unique_topic("lib-g")
    asyncio.run(_create(b, topic, 2))
    delivered: list[tuple[int, int]] = []
    with SyncProducer({"bootstrap.servers": b}) as producer:
        for index in range(20):
            producer.produce(
                topic, b"v%d" % index, b"k%d" % index,
                on_delivery=lambda error, m: delivered.append((m.partition, m.offset)),
            )  # fmt: skip
        assert producer.flush(30) == 0
    assert len(delivered) == 20

    async def read(count: int) -> list[bytes | None]:
        settings = {
            "bootstrap.servers": b,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        async with Consumer(settings) as consumer:
            consumer.subscribe([topic])
            values: list[bytes | None] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while len(values) < count and loop.time() < deadline:
                values += [m.value() for m in await consumer.consume(count - len(values), 1.0)]
            await consumer.commit()
            committed = await consumer.committed(consumer.assignment())
            assert sum(committed.values()) == len(values)  # every partition read from 0
            return values

    first = asyncio.run(read(20))
    assert sorted(first) == sorted(b"v%d" % i for i in range(20))

    async def committed() -> dict[TopicPartition, int]:
        async with AdminClient({"bootstrap.servers": b}) as admin:
            return await admin.list_consumer_group_offsets(group)

    offsets = asyncio.run(committed())
    ends = {p: max(o for q, o in delivered if q == p) + 1 for p, _ in delivered}
    assert offsets == {TopicPartition(topic, p): end for p, end in ends.items()}


def test_unknown_topic_raises_kafka_exception_with_the_code(server) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with Producer({"bootstrap.servers": server.bootstrap_servers}) as producer:
            absent = unique_topic("absent")
            with pytest.raises(KafkaException) as raised:
                await producer.send(absent, b"x")
            assert raised.value.code is ErrorCode.unknown_topic_or_partition
            assert raised.value.retriable  # as in Kafka: the topic may be being created
            assert absent in str(raised.value)

    asyncio.run(scenario())
