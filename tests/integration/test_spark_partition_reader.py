"""The executor side of the Spark source without Spark: `read_range` against a real server.

Transactions (committed, aborted, still open) at both isolation levels, compressed batches from
librdkafka, range ends inside batches, the poll timeout while a transaction holds the last stable
offset back, and a range past the log's end under both `failOnDataLoss` settings.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from moldau.spark.partition_reader import DataLossError, read_range
from moldau.spark.planning import OffsetRange

from .conftest import MoldauServer
from .support import DEADLINE_S, unique_topic
from .test_spark_support import consume_all, create_topic

pytest.importorskip("pyspark")


def rows(server: MoldauServer, topic: str, start: int, end: int, **options: Any) -> list[Any]:
    client = {"bootstrap.servers": server.bootstrap_servers}
    client.update(options.pop("client", {}))
    batches = list(read_range(client, OffsetRange(topic, 0, start, end), **options))
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    return list(zip(*(table.column(name).to_pylist() for name in ("offset", "value")), strict=True))


def produce_in_transactions(bootstrap: str, topic: str, outcomes: list[str]) -> Producer:
    """One transaction of three records per outcome (commit, abort or open), in order; returns
    the producer so an open transaction stays open."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique_topic("tx"), "linger.ms": 5}
    )
    producer.init_transactions(DEADLINE_S)
    for index, outcome in enumerate(outcomes):
        producer.begin_transaction()
        for record in range(3):
            producer.produce(topic, f"{outcome}-{index}-{record}".encode(), partition=0)
        assert producer.flush(DEADLINE_S) == 0  # on the log before the transaction ends
        if outcome == "commit":
            producer.commit_transaction(DEADLINE_S)
        elif outcome == "abort":
            producer.abort_transaction(DEADLINE_S)
    return producer


def test_read_committed_skips_aborted_transactions_and_markers(server: MoldauServer) -> None:
    topic = unique_topic("reader-tx")
    create_topic(server.bootstrap_servers, topic)
    produce_in_transactions(server.bootstrap_servers, topic, ["commit", "abort", "commit"])
    # each transaction: three records and a marker; offsets 0-2, 4-6 (aborted), 8-10
    committed = rows(server, topic, 0, 12)
    assert committed == [(o, f"commit-0-{o}".encode()) for o in (0, 1, 2)] + [
        (o, f"commit-2-{o - 8}".encode()) for o in (8, 9, 10)
    ]
    assert [value for _o, value in committed] == [
        m[3] for m in consume_all(server.bootstrap_servers, topic, 1)
    ]
    uncommitted = rows(server, topic, 0, 12, client={"isolation.level": "read_uncommitted"})
    assert [offset for offset, _v in uncommitted] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert rows(server, topic, 5, 9) == [(8, b"commit-2-0")]


def test_an_open_transaction_holds_reading_until_the_poll_timeout(server: MoldauServer) -> None:
    topic = unique_topic("reader-open")
    create_topic(server.bootstrap_servers, topic)
    producer = produce_in_transactions(server.bootstrap_servers, topic, ["commit", "open"])
    try:
        assert rows(server, topic, 0, 4) == [(o, f"commit-0-{o}".encode()) for o in (0, 1, 2)]
        with pytest.raises(TimeoutError, match="pollTimeoutMs"):
            rows(server, topic, 0, 7, poll_timeout_ms=3000)
        everything = rows(server, topic, 0, 7, client={"isolation.level": "read_uncommitted"})
        assert [offset for offset, _v in everything] == [0, 1, 2, 4, 5, 6]
    finally:
        producer.abort_transaction(DEADLINE_S)


def test_compressed_batches_and_a_range_end_inside_one(server: MoldauServer) -> None:
    topic = unique_topic("reader-zstd")
    create_topic(server.bootstrap_servers, topic)
    producer = Producer(
        {"bootstrap.servers": server.bootstrap_servers, "compression.type": "zstd", "linger.ms": 50}
    )
    for index in range(5000):
        producer.produce(topic, f"value-{index}".encode() * 3, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    read = rows(server, topic, 1234, 4321)
    assert read == [(o, f"value-{o}".encode() * 3) for o in range(1234, 4321)]


def test_a_range_past_the_log_end_is_data_loss(server: MoldauServer) -> None:
    topic = unique_topic("reader-short")
    create_topic(server.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    for index in range(3):
        producer.produce(topic, f"v{index}".encode(), partition=0)
    assert producer.flush(DEADLINE_S) == 0
    with pytest.raises(DataLossError, match="log ends at 3"):
        rows(server, topic, 0, 10)
    assert rows(server, topic, 0, 10, fail_on_data_loss=False) == [
        (o, f"v{o}".encode()) for o in range(3)
    ]
    with pytest.raises(DataLossError, match="log ends at 3"):
        rows(server, topic, 5, 10)
