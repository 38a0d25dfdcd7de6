"""A coordinator answers only once its records are on every in-sync replica of its partition (as
Kafka's coordinators append with acks=all): what it acknowledged survives its broker's failure.

Found by the chaos suite (tests/chaos, pause-leader seed 1): a transaction coordinator that
answered after its local fsync only was paused; the next leader of its `__transaction_state`
partition loaded a log without the records it had answered with, wrote the previous
transaction's COMMIT markers again, and so committed part of the transaction that followed.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, Cluster, build_cluster, wait_for
from .wire import Connection

# A paused follower stays in the ISR (and its broker unfenced) for the whole test.
SETTINGS = {
    "broker.session.timeout.ms": "30000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "30000",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
HELD_S = 3.0  # how long an answer must not come while a follower is paused


def _coordinator(cluster: Cluster, key: str, key_type: int) -> int:
    node = next(iter(cluster.nodes.values()))
    with Connection("127.0.0.1", int(node.bootstrap.split(":")[1])) as wire:
        response = wire.request(10, 3, {"key": key, "key_type": key_type})
    assert response.error_code == 0, response
    return int(response.node_id)


def _pause_a_follower(cluster: Cluster, coordinator: int) -> tuple[int, str]:
    """SIGSTOP a node other than the coordinator (every node holds a replica of the internal
    topics' only partition); the bootstrap list of the nodes still running."""
    follower = next(n for n in sorted(cluster.nodes) if n != coordinator)
    os.kill(cluster.nodes[follower].pid, signal.SIGSTOP)
    running = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != follower)
    return follower, running


def test_an_offset_commit_is_answered_once_every_in_sync_replica_has_it(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=SETTINGS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("events", 1, 3)])["events"].result(15)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "durable"})
    consumer.commit(offsets=[TopicPartition("events", 0, 1)], asynchronous=False)
    consumer.close()
    follower, running = _pause_a_follower(cluster, _coordinator(cluster, "durable", 0))
    try:
        consumer = Consumer({"bootstrap.servers": running, "group.id": "durable"})
        outcome: list[object] = []

        def commit() -> None:
            try:
                consumer.commit(offsets=[TopicPartition("events", 0, 5)], asynchronous=False)
                outcome.append("ok")
            except KafkaException as error:
                outcome.append(error)

        committing = threading.Thread(target=commit, daemon=True)
        committing.start()
        committing.join(HELD_S)
        assert not outcome, f"commit answered while a follower could not copy it: {outcome}"
    finally:
        os.kill(cluster.nodes[follower].pid, signal.SIGCONT)
    committing.join(30)
    assert outcome == ["ok"]
    [committed] = consumer.committed([TopicPartition("events", 0)], timeout=10)
    assert committed.offset == 5
    consumer.close()


def test_init_transactions_is_answered_once_every_in_sync_replica_has_it(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=SETTINGS)
    warm = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warm-up"})
    warm.init_transactions(30)  # the transaction state topic exists and is loaded
    follower, running = _pause_a_follower(cluster, _coordinator(cluster, "durable-txn", 1))
    try:
        producer = Producer({"bootstrap.servers": running, "transactional.id": "durable-txn"})
        try:
            producer.init_transactions(HELD_S)
            answered = True
        except KafkaException as error:
            assert error.args[0].retriable(), error
            answered = False
        assert not answered, "InitProducerId answered while a follower could not copy it"
    finally:
        os.kill(cluster.nodes[follower].pid, signal.SIGCONT)
    wait_for(
        lambda: producer.init_transactions(10) is None,
        timeout_s=30,
        what="InitProducerId answered once the follower is back",
    )
    producer.begin_transaction()
    producer.abort_transaction(10)
