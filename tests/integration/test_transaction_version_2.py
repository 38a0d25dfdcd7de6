"""Transaction version 2 (KIP-890 part 2) over raw sockets, as a Kafka 4 client speaks it: no
AddPartitionsToTxn or AddOffsetsToTxn, Produce v12 and TxnOffsetCommit v5 add the partitions on
the broker, EndTxn v5 bumps the epoch; a late write with the old epoch is fenced instead of
opening a transaction nobody will end. Moldau's own client speaks it too, and speaks version 1 to
a cluster at level 1: checked by the requests it sends (a spy on its connections)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as RdTopicPartition

from moldau.client import SyncConsumer
from moldau.client import TopicPartition as MoldauTopicPartition
from moldau.client.admin import SyncAdminClient
from moldau.client.connection import BrokerConnection
from moldau.client.producer import SyncProducer
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch

from .cluster import COMBINED, build_cluster
from .support import unique_topic, wait_until
from .wire import Connection, create_topics, find_coordinator, list_offsets

INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS = 22, 26, 28, 65
PRODUCE, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN = 0, 24, 25


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(api key, version) of every request Moldau's client sends in this process."""
    requests: list[tuple[int, int]] = []
    original = BrokerConnection.request

    async def request(self: BrokerConnection, api_key: int, data: Any, **options: Any) -> Any:
        version = options.pop("version", None)
        if version is None:
            version = self.versions.pick(api_key)
        requests.append((int(api_key), int(version)))
        return await original(self, api_key, data, version=version, **options)

    monkeypatch.setattr(BrokerConnection, "request", request)
    return requests


def _versions(sent: list[tuple[int, int]], api_key: int) -> set[int]:
    return {version for key, version in sent if key == api_key}


def _produce(
    connection: Connection,
    version: int,
    transactional_id: str,
    topic: str,
    partition: int,
    producer: tuple[int, int],
    sequence: int,
    value: bytes,
) -> Any:
    batch = build_batch(
        [NewRecord(value=value)],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        transactional=True,
    )
    response = connection.request(
        0,
        version,
        {
            "transactional_id": transactional_id,
            "acks": -1,
            "timeout": 10000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        },
    )
    return response.responses[0].partition_responses[0]


def _describe(connection: Connection, transactional_id: str) -> Any:
    response = connection.request(
        DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
    )
    return response.transaction_states[0]


def test_partitions_and_offsets_join_the_transaction_on_the_broker(server) -> None:
    topic, group, transactional_id = unique_topic("tv2"), "tv2-group", "tv2-writer"
    with Connection(server.host, server.port, timeout=20) as connection:
        versions = connection.request(
            18, 3, {"client_software_name": "tv2-test", "client_software_version": "1"}
        )
        finalized = {f.name: f.max_version_level for f in versions.finalized_features}
        assert finalized["transaction.version"] == 2
        create_topics(connection, {topic: 2})
        for key, key_type in ((transactional_id, 1), (group, 0)):
            assert find_coordinator(connection, key, key_type).error_code == ErrorCode.none

        def init_producer_id() -> Any:
            answer = connection.request(
                INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            return answer if answer.error_code == ErrorCode.none else None

        initialized: Any = wait_until(init_producer_id, message="the coordinator loaded")
        producer = (initialized.producer_id, initialized.producer_epoch)
        wait_until(
            lambda: list_offsets(connection, topic, 1, -1).error_code == ErrorCode.none,
            message="the topic's partitions have a leader",
        )

        # Produce v11 only verifies (KIP-890 part 1): the partition was never added.
        refused = _produce(connection, 11, transactional_id, topic, 1, producer, 0, b"v11")
        assert refused.error_code == ErrorCode.invalid_txn_state
        # Produce v12 adds it.
        written = _produce(connection, 12, transactional_id, topic, 0, producer, 0, b"committed")
        assert written.error_code == ErrorCode.none
        state = _describe(connection, transactional_id)
        assert state.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]

        # TxnOffsetCommit v5 adds the group's offsets partition without AddOffsetsToTxn.
        committed = connection.request(
            TXN_OFFSET_COMMIT,
            5,
            {
                "transactional_id": transactional_id,
                "group_id": group,
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 7,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        assert {t.topic for t in _describe(connection, transactional_id).topics} == {
            topic,
            "__consumer_offsets",
        }

        ended = connection.request(
            END_TXN,
            5,
            {
                "transactional_id": transactional_id,
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "committed": True,
            },
        )
        assert ended.error_code == ErrorCode.none
        assert (ended.producer_id, ended.producer_epoch) == (producer[0], producer[1] + 1)

        wait_until(
            lambda: _describe(connection, transactional_id).transaction_state == "CompleteCommit",
            message="the markers written",
        )
        # A write of the ended transaction that arrives late is fenced: with the old epoch it
        # cannot open a transaction that no EndTxn would ever end.
        late = _produce(connection, 12, transactional_id, topic, 1, producer, 1, b"zombie")
        assert late.error_code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced)
        assert _describe(connection, transactional_id).transaction_state == "CompleteCommit"

    consumer = Consumer(
        {
            "bootstrap.servers": f"{server.host}:{server.port}",
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        [position] = consumer.committed([RdTopicPartition(topic, 0)], timeout=20)
        assert position.offset == 7
        consumer.assign([RdTopicPartition(topic, 0), RdTopicPartition(topic, 1)])
        values: list[bytes] = []
        while not values:
            message = consumer.poll(10)
            assert message is not None, "the committed record was not delivered"
            if message.error() is None:
                values.append(message.value())
        assert values == [b"committed"]
    finally:
        consumer.close()


def test_moldau_client_transactions_under_version_2(server, sent) -> None:
    topic, group = unique_topic("tv2-client"), "tv2-client-group"
    bootstrap = f"{server.host}:{server.port}"
    with Connection(server.host, server.port, timeout=20) as connection:
        create_topics(connection, {topic: 1})
    producer = SyncProducer({"bootstrap.servers": bootstrap, "transactional.id": "tv2-client"})
    try:
        producer.init_transactions()
        epoch = producer.transactions.producer_epoch
        for round_ in range(3):
            producer.begin_transaction()
            assert producer.transactions.version_2
            producer.produce(topic, value=f"round {round_}".encode())
            producer.send_offsets_to_transaction(
                {MoldauTopicPartition(topic, 0): round_ + 1}, group
            )
            producer.commit_transaction()
        # Each EndTxn v5 bumped the epoch: three transactions, three bumps.
        assert producer.transactions.producer_epoch == epoch + 3
    finally:
        producer.close()
    # Partitions and offsets joined on the broker: no AddPartitionsToTxn, no AddOffsetsToTxn.
    assert not _versions(sent, ADD_PARTITIONS_TO_TXN) | _versions(sent, ADD_OFFSETS_TO_TXN)
    assert min(_versions(sent, PRODUCE)) >= 12
    assert _versions(sent, TXN_OFFSET_COMMIT) == _versions(sent, END_TXN) == {5}
    with SyncConsumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        committed = consumer.committed([MoldauTopicPartition(topic, 0)])
    assert committed == {MoldauTopicPartition(topic, 0): 3}


def test_a_cluster_formatted_at_version_1_is_upgraded_to_2(
    start_server, tmp_path: Path, sent
) -> None:
    """`moldau storage format --feature transaction.version=1` (as kafka-storage's): Moldau's
    client then adds partitions itself and EndTxn keeps the epoch; after UpdateFeatures to 2 a
    new producer speaks version 2. Every committed record is read back."""
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED],
        format_arguments=["--feature", "transaction.version=1"],
    )
    bootstrap = cluster.nodes[1].bootstrap
    topic = unique_topic("tv1")
    host, port = bootstrap.split(":")
    with Connection(host, int(port), timeout=20) as wire:
        versions = wire.request(
            18, 3, {"client_software_name": "tv2-test", "client_software_version": "1"}
        )
        assert {f.name: f.max_version_level for f in versions.finalized_features}[
            "transaction.version"
        ] == 1
        create_topics(wire, {topic: 1})

    def transactions(value: bytes) -> tuple[bool, int, int]:
        sent.clear()
        producer = SyncProducer({"bootstrap.servers": bootstrap, "transactional.id": "tv-upgrade"})
        try:
            producer.init_transactions()
            epoch = producer.transactions.producer_epoch
            producer.begin_transaction()
            version_2 = producer.transactions.version_2
            producer.produce(topic, value=value)
            producer.commit_transaction()
            return version_2, epoch, producer.transactions.producer_epoch
        finally:
            producer.close()

    version_2, before, after = transactions(b"at version 1")
    assert not version_2 and after == before  # EndTxn v4: no bump
    # Version 1: the client adds the partition; Produce v12 would add it on the broker.
    assert _versions(sent, ADD_PARTITIONS_TO_TXN) and max(_versions(sent, PRODUCE)) == 11
    assert max(_versions(sent, END_TXN)) == 4
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.update_features({"transaction.version": 2})
    version_2, before, after = transactions(b"at version 2")
    assert version_2 and after == before + 1
    assert not _versions(sent, ADD_PARTITIONS_TO_TXN) and min(_versions(sent, PRODUCE)) >= 12

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tv-upgrade-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([RdTopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        wait_until(lambda: _collect(consumer, values) >= 2, message="both committed records read")
        assert values == [b"at version 1", b"at version 2"]
    finally:
        consumer.close()


def _collect(consumer: Consumer, values: list[bytes]) -> int:
    message = consumer.poll(1)
    if message is not None and message.error() is None:
        values.append(message.value())
    return len(values)


_RETRIABLE = {ErrorCode.not_enough_replicas, ErrorCode.concurrent_transactions}


def _produce_body(
    transactional_id: str, topic: str, producer: tuple[int, int], batches: dict[int, bytes]
) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout": 10000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [
                    {"index": index, "records": batch} for index, batch in batches.items()
                ],
            }
        ],
    }


def _transactional_batch(producer: tuple[int, int], sequence: int, values: list[bytes]) -> bytes:
    return build_batch(
        [NewRecord(value=value) for value in values],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        transactional=True,
    )


def test_pipelined_batches_of_a_new_epoch_reach_the_log_in_order(server) -> None:
    """After EndTxn v5 bumps the epoch, a client resets its sequences and sends two Produce
    requests back to back on one connection, the second carrying the next batches of the same
    partitions. Both must be applied in the order sent: the first may be refused with a
    retriable error while the previous transaction's markers are written (and the batch behind
    it then be out of order, as in Kafka), but a partition's first batch is never accepted while
    its contiguous next one is refused as out of order (found with franz-go; the Java producer
    failed the same way in its first transaction)."""
    topic, transactional_id = unique_topic("tv2-pipelined"), "tv2-pipelined"
    partitions = [0, 1, 2]
    with Connection(server.host, server.port, timeout=20) as connection:
        create_topics(connection, {topic: len(partitions)})
        assert find_coordinator(connection, transactional_id, 1).error_code == ErrorCode.none

        def init_producer_id() -> Any:
            answer = connection.request(
                INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            return answer if answer.error_code == ErrorCode.none else None

        initialized: Any = wait_until(init_producer_id, message="the coordinator loaded")
        producer = (initialized.producer_id, initialized.producer_epoch)
        wait_until(
            lambda: all(
                list_offsets(connection, topic, p, -1).error_code == ErrorCode.none
                for p in partitions
            ),
            message="the topic's partitions have a leader",
        )
        expected: list[bytes] = []
        for round_ in range(4):
            # Round 0 opens the producer's first transaction; later rounds follow an EndTxn
            # at once (odd rounds) or once the markers are written (even rounds).
            first = [f"{round_}-a{i}".encode() for i in range(2)]
            second = [f"{round_}-b{i}".encode() for i in range(3)]
            pending = {
                index: [(0, first), (len(first), second)] for index in partitions
            }  # partition -> batches not yet accepted, in sequence order
            while any(pending.values()):
                requests = []
                for position in range(2):
                    batches = {
                        index: _transactional_batch(producer, *waiting[position])
                        for index, waiting in pending.items()
                        if len(waiting) > position
                    }
                    if batches:
                        body = _produce_body(transactional_id, topic, producer, batches)
                        requests.append((PRODUCE, 12, body))
                answers = connection.pipeline(requests)
                accepted: dict[int, int] = {}  # partition -> batches accepted this time
                for position, answer in enumerate(answers):
                    for partition_answer in answer.responses[0].partition_responses:
                        index, code = partition_answer.index, partition_answer.error_code
                        # A batch behind one refused (retriably) may be out of order, as in
                        # Kafka: the client sends both again. Behind one accepted, never.
                        allowed = {ErrorCode.none, *_RETRIABLE}
                        if accepted.get(index, 0) < position:
                            allowed.add(ErrorCode.out_of_order_sequence_number)
                        assert code in allowed, (
                            f"round {round_}, request {position}, partition {index}: "
                            f"{ErrorCode(code).name}"
                        )
                        if code == ErrorCode.none:
                            assert accepted.get(index, 0) == position, (
                                f"partition {index} took request {position}'s batch "
                                "before the one sent ahead of it"
                            )
                            accepted[index] = position + 1
                for index, count in accepted.items():
                    del pending[index][:count]
            expected += first + second
            ended = connection.request(
                END_TXN,
                5,
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer[0],
                    "producer_epoch": producer[1],
                    "committed": True,
                },
            )
            assert ended.error_code == ErrorCode.none
            producer = (ended.producer_id, ended.producer_epoch)
            if round_ % 2 == 0:
                wait_until(
                    lambda: (
                        _describe(connection, transactional_id).transaction_state
                        == "CompleteCommit"
                    ),
                    message="the markers written",
                )

    consumer = Consumer(
        {
            "bootstrap.servers": f"{server.host}:{server.port}",
            "group.id": "tv2-pipelined-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([RdTopicPartition(topic, index, 0) for index in partitions])
        by_partition: dict[int, list[bytes]] = {index: [] for index in partitions}

        def read_all() -> bool:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                by_partition[message.partition()].append(message.value())
            return all(len(values) == len(expected) for values in by_partition.values())

        wait_until(read_all, message="every committed record read")
        assert by_partition == {index: expected for index in partitions}
    finally:
        consumer.close()
