"""Transactions written by Moldau's own producer (`moldau.client.Producer` with
`transactional.id`), read back by confluent-kafka's consumer at read_committed and by Moldau's at
read_uncommitted: commits are seen, aborts are not, a newer producer fences an older one, group
offsets commit with the transaction, and another client can end a transaction by its id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING

from moldau.client import (
    OFFSET_BEGINNING as BEGINNING,
)
from moldau.client import (
    FatalTransactionError,
    KafkaException,
    Producer,
    SyncAdminClient,
    SyncConsumer,
    TopicPartition,
)
from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.transactions import describe_transaction, end_transaction

from .conftest import MoldauServer, ServerFactory
from .rdkafka import consume, create_topic
from .support import DEADLINE_S, unique_topic


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> Iterator[MoldauServer]:
    yield module_server_factory()


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 2}
    )


def committed_values(bootstrap: str, topic: str, counts: dict[int, int]) -> list[bytes]:
    """What confluent-kafka's read_committed consumer reads (and nothing more, see `consume`)."""
    records = consume(
        bootstrap,
        topic,
        dict.fromkeys(counts, OFFSET_BEGINNING),
        counts,
        **{"isolation.level": "read_committed"},
    )
    return sorted(r.value or b"" for r in records)


def all_values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Everything in the log (Moldau's consumer at read_uncommitted), aborted records too."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    settings = {"bootstrap.servers": bootstrap, "isolation.level": "read_uncommitted"}
    values = []
    with SyncConsumer(settings) as consumer:
        consumer.assign(tps, dict.fromkeys(tps, BEGINNING))
        while True:
            messages = consumer.consume(10_000, 2.0)
            values += [m.value() or b"" for m in messages]
            if not messages and consumer.all_at_end():
                return sorted(values)


def test_read_committed_sees_committed_transactions_and_not_aborted_ones(
    server: MoldauServer,
) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic("client-txn")
    create_topic(bootstrap, topic, partitions=2)

    async def write() -> None:
        async with transactional(bootstrap, unique_topic("client-txn-id")) as producer:
            await producer.init_transactions(DEADLINE_S)
            for cycle, commit in enumerate((True, False, True, False, True)):
                producer.begin_transaction()
                for index in range(7):
                    producer.produce(topic, b"%d-%d" % (cycle, index), partition=index % 2)
                if commit:
                    await producer.commit_transaction(DEADLINE_S)
                else:
                    await producer.flush(DEADLINE_S)  # the aborted records reach the log too
                    await producer.abort_transaction(DEADLINE_S)

    asyncio.run(write())
    committed = sorted(b"%d-%d" % (c, i) for c in (0, 2, 4) for i in range(7))
    aborted = sorted(b"%d-%d" % (c, i) for c in (1, 3) for i in range(7))
    assert committed_values(bootstrap, topic, {0: 12, 1: 9}) == committed
    assert all_values(bootstrap, topic, 2) == sorted(committed + aborted)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    server: MoldauServer,
) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic("client-fence")
    create_topic(bootstrap, topic, partitions=1)
    transactional_id = unique_topic("client-fenced")

    async def race() -> FatalTransactionError:
        async with (
            transactional(bootstrap, transactional_id) as first,
            transactional(bootstrap, transactional_id) as second,
        ):
            await first.init_transactions(DEADLINE_S)
            first.begin_transaction()
            first.produce(topic, b"zombie", partition=0)
            await first.flush(DEADLINE_S)
            await second.init_transactions(DEADLINE_S)  # aborts what the first left open
            second.begin_transaction()
            second.produce(topic, b"winner", partition=0)
            await second.commit_transaction(DEADLINE_S)
            with pytest.raises(FatalTransactionError) as raised:
                first.produce(topic, b"late", partition=0)
                await first.commit_transaction(DEADLINE_S)
            with pytest.raises(FatalTransactionError):  # fenced for good
                first.begin_transaction()
            return raised.value

    error = asyncio.run(race())
    assert error.fatal
    assert error.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), error
    assert committed_values(bootstrap, topic, {0: 1}) == [b"winner"]
    assert all_values(bootstrap, topic, 1) == [b"winner", b"zombie"]


def test_offsets_sent_to_a_transaction_commit_with_it(server: MoldauServer) -> None:
    bootstrap = server.bootstrap_servers
    topic = unique_topic("client-txn-offsets")
    create_topic(bootstrap, topic, partitions=1)
    group = unique_topic("client-txn-group")
    tp = TopicPartition(topic, 0)

    async def write() -> None:
        async with transactional(bootstrap, unique_topic("client-txn-offsets-id")) as producer:
            await producer.init_transactions(DEADLINE_S)
            producer.begin_transaction()
            producer.produce(topic, b"aborted", partition=0)
            await producer.send_offsets_to_transaction({tp: 99}, group, DEADLINE_S)
            await producer.abort_transaction(DEADLINE_S)
            producer.begin_transaction()
            producer.produce(topic, b"committed", partition=0)
            await producer.send_offsets_to_transaction({tp: 7}, group, DEADLINE_S)
            await producer.commit_transaction(DEADLINE_S)

    asyncio.run(write())
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group, [tp]) == {tp: 7}
    assert committed_values(bootstrap, topic, {0: 1}) == [b"committed"]


async def settled_state(cluster: Cluster, transactional_id: str) -> str | None:
    """The state once the markers are written (EndTxn answers at Prepare*, before them)."""
    async with asyncio.timeout(DEADLINE_S):
        while True:
            state = await describe_transaction(cluster, transactional_id)
            if not (state or "").startswith("Prepare"):
                return state
            await asyncio.sleep(0.05)


def test_another_client_commits_an_open_transaction_by_id_producer_id_and_epoch(
    server: MoldauServer,
) -> None:
    """The Spark sink's path: a task writes and leaves its transaction open, the driver ends it."""
    bootstrap = server.bootstrap_servers
    topic = unique_topic("client-txn-handoff")
    create_topic(bootstrap, topic, partitions=1)
    ids = {True: unique_topic("handoff-commit"), False: unique_topic("handoff-abort")}

    async def write_then_end() -> list[str | None]:
        handed_over = {}
        for committed, transactional_id in ids.items():
            async with transactional(bootstrap, transactional_id) as producer:
                await producer.init_transactions(DEADLINE_S)
                producer.begin_transaction()
                producer.produce(topic, b"commit" if committed else b"abort", partition=0)
                await producer.flush(DEADLINE_S)
                transactions = producer.transactions
                handed_over[committed] = (transactions.producer_id, transactions.producer_epoch)
        cluster = Cluster(ClientConfig({"bootstrap.servers": bootstrap}))
        try:
            states = [await describe_transaction(cluster, ids[True])]
            for committed, (producer_id, epoch) in handed_over.items():
                await end_transaction(
                    cluster,
                    transactional_id=ids[committed],
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    committed=committed,
                )
            states += [await settled_state(cluster, ids[c]) for c in (True, False)]
            stale = handed_over[True]
            with pytest.raises(KafkaException):  # a stale epoch cannot end anything
                await end_transaction(
                    cluster,
                    transactional_id=ids[True],
                    producer_id=stale[0],
                    producer_epoch=stale[1],
                    committed=False,
                )
            states.append(await describe_transaction(cluster, unique_topic("never-used")))
            return states
        finally:
            await cluster.close()

    states = asyncio.run(write_then_end())
    assert states == ["Ongoing", "CompleteCommit", "CompleteAbort", None]
    assert committed_values(bootstrap, topic, {0: 1}) == [b"commit"]
