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


def describe_transaction(server: MoldauServer, transactional_id: str) -> Any:
    with Connection(server.host, server.port) as connection:
        response = connection.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
        )
    [state] = response.transaction_states
    return state


def test_open_transactions_complete_or_time_out_after_a_restart(start_server: Any) -> None:
    server = start_server()
    bootstrap = server.bootstrap_servers
    topic = unique_topic("txn-restart")
    create_topic(bootstrap, topic, partitions=2)
    committed = transactional_producer(bootstrap, unique_topic("done"))
    committed.begin_transaction()
    for partition in (0, 1):
        committed.produce(topic, value=b"before-%d" % partition, partition=partition)
    committed.commit_transaction(DEADLINE_S)
    hanging_id = unique_topic("hanging")
    hanging = transactional_producer(bootstrap, hanging_id, **{"transaction.timeout.ms": 3000})
    hanging.begin_transaction()
    for partition in (0, 1):
        hanging.produce(topic, value=b"never-%d" % partition, partition=partition)
    assert hanging.flush(DEADLINE_S) == 0  # in the log, its transaction still open
    assert describe_transaction(server, hanging_id).transaction_state == "Ongoing"
    after = transactional_producer(bootstrap, unique_topic("after"))
    after.begin_transaction()
    after.produce(topic, value=b"after-0", partition=0)
    after.commit_transaction(DEADLINE_S)  # committed, but above the hanging transaction's start
    stable, ends = list_offsets(server, topic, 2, 1), list_offsets(server, topic, 2, 0)
    assert stable[0] < ends[0] and stable[1] < ends[1]  # the open transaction holds the LSO

    server.restart()
    # The transaction times out (its start time survived the restart) and is aborted; a
    # read_committed consumer started now sees the committed records once the LSO moves.
    seen = consume(
        server.bootstrap_servers,
        topic,
        {0: OFFSET_BEGINNING, 1: OFFSET_BEGINNING},
        {0: 2, 1: 1},
        **{"isolation.level": "read_committed"},
    )
    assert sorted(record.value or b"" for record in seen) == [b"after-0", b"before-0", b"before-1"]
    wait_stable(server, topic, 2)
    wait_until(
        lambda: describe_transaction(server, hanging_id).transaction_state == "CompleteAbort",
        message="the timed out transaction never completed its abort",
    )
    # The abort fenced the producer: its epoch was bumped past the one it holds.
    assert describe_transaction(server, hanging_id).producer_epoch > 0


def test_a_hanging_transaction_is_found_and_its_partitions_described(start_server: Any) -> None:
    server = start_server()
    bootstrap = server.bootstrap_servers
    topic = unique_topic("txn-views")
    create_topic(bootstrap, topic, partitions=1)
    transactional_id = unique_topic("open")
    producer = transactional_producer(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    assert producer.flush(DEADLINE_S) == 0
    with Connection(server.host, server.port) as connection:
        listed = connection.request(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {
                "state_filters": ["Ongoing", "Bogus"],
                "producer_id_filters": [],
                "duration_filter": -1,
            },
        )
        producers = connection.request(
            ApiKey.DESCRIBE_PRODUCERS,
            0,
            {"topics": [{"name": topic, "partition_indexes": [0]}]},
        )
    assert listed.unknown_state_filters == ("Bogus",)
    assert [t.transactional_id for t in listed.transaction_states] == [transactional_id]
    described = describe_transaction(server, transactional_id)
    assert [(t.topic, t.partitions) for t in described.topics] == [(topic, (0,))]
    [active] = producers.topics[0].partitions[0].active_producers
    assert active.producer_id == described.producer_id
    assert active.current_txn_start_offset == 0
    producer.abort_transaction(DEADLINE_S)
    wait_stable(server, topic, 1)
    wait_until(  # the markers are written before the transaction is marked complete
        lambda: describe_transaction(server, transactional_id).transaction_state == "CompleteAbort",
        message="the aborted transaction never completed",
    )
