"""The transactional producer's state checks, which refuse calls before any request is sent."""

from __future__ import annotations

import asyncio

import pytest

from moldau.client import ConfigException, KafkaException, Producer
from moldau.client.transactions import TransactionState

SETTINGS = {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "t"}


def test_produce_outside_a_transaction_is_refused() -> None:
    async def attempt() -> None:
        producer = Producer(SETTINGS)
        with pytest.raises(KafkaException, match="uninitialized"):
            producer.produce("topic", b"v")
        with pytest.raises(KafkaException, match="begin_transaction"):
            producer.begin_transaction()
        assert producer.transactions.state is TransactionState.UNINITIALIZED
        await producer.cluster.close()

    asyncio.run(attempt())


def test_a_transactional_producer_needs_acks_all() -> None:
    with pytest.raises(ConfigException, match="acks"):
        Producer({**SETTINGS, "acks": "1"})


def test_a_producer_without_transactional_id_has_no_transactions() -> None:
    async def attempt() -> None:
        producer = Producer({"bootstrap.servers": "127.0.0.1:1"})
        with pytest.raises(KafkaException, match="has no"):
            producer.begin_transaction()
        await producer.cluster.close()

    asyncio.run(attempt())
