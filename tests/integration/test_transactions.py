"""Transactions with real clients against a real server: commit and abort cycles over several
topics and partitions seen through read_committed and read_uncommitted consumers, fencing of a
producer by a newer one with the same transactional.id, and the admin views (KIP-664)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaException, Producer

from moldau.protocol.api_keys import ApiKey

from .conftest import MoldauServer
from .rdkafka import consume, create_topic
from .support import DEADLINE_S, unique_topic, wait_until
from .wire import Connection


def transactional_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 5,
    }
    settings.update(config)
    producer = Producer(settings)
    producer.init_transactions(DEADLINE_S)
    return producer


def list_offsets(server: MoldauServer, topic: str, partitions: int, isolation: int) -> list[int]:
    with Connection(server.host, server.port) as connection:
        response = connection.request(
            ApiKey.LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
                            for p in range(partitions)
                        ],
                    }
                ],
            },
        )
    return [p.offset for p in response.topics[0].partitions]


def wait_stable(server: MoldauServer, topic: str, partitions: int) -> None:
    """Every transaction on `topic` is complete: the last stable offsets reach the ends."""
    wait_until(
        lambda: (
            list_offsets(server, topic, partitions, 1) == list_offsets(server, topic, partitions, 0)
        ),
        message=f"{topic}: last stable offset stuck below the high watermark",
    )


def test_commit_and_abort_cycles_over_topics_and_partitions(start_server: Any) -> None:
    server = start_server()
    bootstrap = server.bootstrap_servers
    topics = [unique_topic("txn-a"), unique_topic("txn-b")]
    for topic in topics:
        create_topic(bootstrap, topic, partitions=3)
    producer = transactional_producer(bootstrap, unique_topic("txn-id"))
    rng = random.Random(5)
    committed: dict[str, dict[int, list[bytes]]] = {t: {p: [] for p in range(3)} for t in topics}
    everything: dict[str, dict[int, list[bytes]]] = {t: {p: [] for p in range(3)} for t in topics}
    outcomes = []
    for cycle in range(40):
        producer.begin_transaction()
        written = []
        for index in range(rng.randint(1, 12)):
            topic = rng.choice(topics)
            partition = rng.randrange(3)
            value = f"{cycle}-{index}".encode()
            producer.produce(topic, value=value, key=b"k", partition=partition)
            written.append((topic, partition, value))
        producer.flush(DEADLINE_S)  # aborted records too reach the log (abort purges unsent)
        commit = rng.random() < 0.6
        outcomes.append(commit)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)
        for topic, partition, value in written:
            everything[topic][partition].append(value)
            if commit:
                committed[topic][partition].append(value)
    assert True in outcomes and False in outcomes
    for topic in topics:
        wait_stable(server, topic, 3)
        starts = dict.fromkeys(range(3), OFFSET_BEGINNING)
        seen = consume(
            bootstrap,
            topic,
            starts,
            {p: len(v) for p, v in committed[topic].items()},
            **{"isolation.level": "read_committed"},
        )
        by_partition: dict[int, list[bytes]] = {p: [] for p in range(3)}
        for record in seen:
            assert record.partition is not None
            by_partition[record.partition].append(record.value or b"")
        assert by_partition == committed[topic]
        seen_all = consume(
            bootstrap,
            topic,
            starts,
            {p: len(v) for p, v in everything[topic].items()},
            **{"isolation.level": "read_uncommitted"},
        )
        all_by_partition: dict[int, list[bytes]] = {p: [] for p in range(3)}
        for record in seen_all:
            assert record.partition is not None
            all_by_partition[record.partition].append(record.value or b"")
        assert all_by_partition == everything[topic]
    producer.flush(DEADLINE_S)


def test_second_producer_with_the_same_transactional_id_fences_the_first(
    start_server: Any,
) -> None:
    server = start_server()
    bootstrap = server.bootstrap_servers
    topic = unique_topic("txn-fence")
    create_topic(bootstrap, topic, partitions=1)
    transactional_id = unique_topic("fenced")
    first = transactional_producer(bootstrap, transactional_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie", partition=0)
    first.flush(DEADLINE_S)
    second = transactional_producer(bootstrap, transactional_id)  # aborts the first's
    second.begin_transaction()
    second.produce(topic, value=b"winner", partition=0)
    second.commit_transaction(DEADLINE_S)
    first.produce(topic, value=b"late", partition=0)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(DEADLINE_S)
    error = raised.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    wait_stable(server, topic, 1)
    seen = consume(
        bootstrap,
        topic,
        {0: OFFSET_BEGINNING},
        {0: 1},
        **{"isolation.level": "read_committed"},
    )
    assert [record.value for record in seen] == [b"winner"]
