"""`moldau.Server` runs a node inside the test process, for tests and notebooks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

import moldau


def _round_trip(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(count):
        producer.produce(topic, value=b"record-%d" % index, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "embedded", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(200):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == count:
                break
    finally:
        consumer.close()
    return values


def test_embedded_server_serves_and_keeps_data_across_restarts(tmp_path: Path) -> None:
    expected = [b"record-%d" % i for i in range(20)]
    with moldau.Server(log_dirs=tmp_path / "data", port=0) as server:
        assert server.bootstrap_servers.startswith("127.0.0.1:")
        assert _round_trip(server.bootstrap_servers, "embedded", 20) == expected
    with moldau.Server(log_dirs=tmp_path / "data", port=0) as server:
        consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "again"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("embedded", 0), timeout=10)
        finally:
            consumer.close()
        assert (low, high) == (0, 20)


def test_embedded_server_is_an_async_context_manager(tmp_path: Path) -> None:
    async def main() -> str:
        async with moldau.Server(log_dirs=tmp_path / "data", port=0) as server:
            return server.bootstrap_servers

    assert asyncio.run(main()).startswith("127.0.0.1:")
