"""Partitions replicated over a cluster of real processes: followers pull from leaders with
Kafka's Fetch, replicas end byte for byte identical, acks=all waits for the ISR."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.client import SyncConsumer
from moldau.client import TopicPartition as MoldauTopicPartition
from moldau.client.partition_fetcher import PartitionFetcher
from moldau.protocol.errors import ErrorCode

from .cluster import BROKER, COMBINED, Cluster, ClusterNode, build_cluster, wait_for
from .wire import Connection

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def _segment_bytes(cluster: Cluster, topic: str, partition: int) -> dict[int, bytes]:
    """Each node's `.log` files of one partition, concatenated in offset order."""
    contents = {}
    for node in cluster.nodes.values():
        directory = node.data_dir / f"{topic}-{partition}"
        files = sorted(directory.glob("*.log")) if directory.exists() else []
        contents[node.node_id] = b"".join(path.read_bytes() for path in files)
    return contents


def test_a_replicated_topic_ends_identical_on_every_replica(start_server, tmp_path: Path) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=FAST)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("replicated", 3, 3, config={"min.insync.replicas": "2"})])[
        "replicated"
    ].result(15)
    wait_for(
        lambda: "replicated" in admin.list_topics(timeout=5).topics,
        timeout_s=10,
        what="the topic in the metadata",
    )
    metadata = admin.list_topics(timeout=10).topics["replicated"]
    for partition in metadata.partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]
    assert {p.leader for p in metadata.partitions.values()} == {1, 2, 3}

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    sent = [b"value-%05d" % index for index in range(1500)]
    for index, value in enumerate(sent):
        producer.produce("replicated", key=b"%d" % index, value=value)
    assert producer.flush(60) == 0

    for partition in range(3):
        wait_for(
            lambda p=partition: len(set(_segment_bytes(cluster, "replicated", p).values())) == 1,
            timeout_s=20,
            what=f"replicas of partition {partition} identical",
        )
        assert _segment_bytes(cluster, "replicated", partition)[1]  # not trivially empty

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "verify",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["replicated"])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value())
    high = [consumer.get_watermark_offsets(TopicPartition("replicated", p))[1] for p in range(3)]
    consumer.close()
    assert sorted(received) == sent  # every acknowledged record exactly once
    assert sum(high) == len(sent)

    # A transaction over partitions led by three brokers: the coordinator sends each leader its
    # markers; read_committed sees the committed records and none of the aborted ones.
    transactional = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": "across-brokers"}
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for index in range(30):
        transactional.produce("replicated", key=b"%d" % index, value=b"committed-%d" % index)
    transactional.commit_transaction(30)
    transactional.begin_transaction()
    for index in range(30):
        transactional.produce("replicated", key=b"%d" % index, value=b"aborted-%d" % index)
    transactional.abort_transaction(30)
    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "committed-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    reader.subscribe(["replicated"])
    seen: list[bytes] = []
    expected = len(sent) + 30
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    # Past the committed records the read stops at the end of every partition: nothing more.
    extra = [m for m in (reader.poll(1.0) for _ in range(3)) if m is not None and not m.error()]
    reader.close()
    assert sorted(seen) == sorted(sent + [b"committed-%d" % i for i in range(30)])
    assert not extra and not any(v.startswith(b"aborted") for v in seen)

    _a_partition_outside_the_transaction_is_refused_by_its_leader(cluster, admin)

    # DeleteRecords answers once every replica dropped the records (followers take the leader's
    # log start from their fetches): the next leader starts its log there too.
    [(_, deleting)] = admin.delete_records([TopicPartition("replicated", 0, 100)]).items()
    assert deleting.result(30).low_watermark == 100
    leader = admin.list_topics("replicated", timeout=5).topics["replicated"].partitions[0].leader
    cluster.stop(leader)
    wait_for(
        lambda: _leader_of(cluster.bootstrap_without(leader), "replicated")[0] not in (-1, leader),
        timeout_s=20,
        what="a new leader of partition 0",
    )
    watcher = Consumer({"bootstrap.servers": cluster.bootstrap_without(leader), "group.id": "w"})
    low, _ = watcher.get_watermark_offsets(TopicPartition("replicated", 0), timeout=10)
    watcher.close()
    assert low == 100


def _a_partition_outside_the_transaction_is_refused_by_its_leader(
    cluster: Cluster, admin: AdminClient
) -> None:
    """KIP-890 part 1 across brokers: a leader that does not coordinate the transactional id
    asks the broker that does (AddPartitionsToTxn v4, verify_only) before it appends a
    producer's first transactional batch; one for a partition never added to the transaction
    is refused with INVALID_TXN_STATE (no hanging transaction), one added is accepted."""
    from moldau.protocol.records import NewRecord, build_batch

    def connect(node_id: int) -> Connection:
        return Connection("127.0.0.1", int(cluster.nodes[node_id].bootstrap.split(":")[1]))

    transactional_id = "verified-across-brokers"
    with connect(1) as connection:
        found = connection.request(10, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
    coordinator = found.coordinators[0].node_id
    leaders = {
        number: partition.leader
        for number, partition in admin.list_topics("replicated", timeout=5)
        .topics["replicated"]
        .partitions.items()
    }
    number, leader = next((n, b) for n, b in sorted(leaders.items()) if b != coordinator)
    with connect(coordinator) as to_coordinator, connect(leader) as to_leader:
        initialized = to_coordinator.request(
            22,
            4,
            {
                "transactional_id": transactional_id,
                "transaction_timeout": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        assert initialized.error_code == ErrorCode.none
        batch = build_batch(
            [NewRecord(value=b"outside")],
            producer_id=initialized.producer_id,
            producer_epoch=initialized.producer_epoch,
            base_sequence=0,
            transactional=True,
        )

        def produce() -> Any:
            answer = to_leader.request(
                0,
                9,
                {
                    "transactional_id": transactional_id,
                    "acks": -1,
                    "timeout": 10000,
                    "topic_data": [
                        {
                            "name": "replicated",
                            "partition_data": [{"index": number, "records": batch}],
                        }
                    ],
                },
            )
            return answer.responses[0].partition_responses[0]

        assert produce().error_code == ErrorCode.invalid_txn_state
        added = to_coordinator.request(
            24,
            3,
            {
                "v3_and_below_transactional_id": transactional_id,
                "v3_and_below_producer_id": initialized.producer_id,
                "v3_and_below_producer_epoch": initialized.producer_epoch,
                "v3_and_below_topics": [{"name": "replicated", "partitions": [number]}],
            },
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        assert produce().error_code == ErrorCode.none
        ended = to_coordinator.request(
            26,
            3,
            {
                "transactional_id": transactional_id,
                "producer_id": initialized.producer_id,
                "producer_epoch": initialized.producer_epoch,
                "committed": False,
            },
        )
        assert ended.error_code == ErrorCode.none


def _leader_of(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    partition = metadata.topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs)


def _produce_raw(node: ClusterNode, topic: str, acks: int) -> int:
    """One record with the wire's Produce v9 to `node` (the partition's leader); the error."""
    from moldau.protocol.records import NewRecord, build_batch

    with Connection("127.0.0.1", int(node.bootstrap.split(":")[1]), timeout=15) as connection:
        response = connection.request(
            0,
            9,
            {
                "acks": acks,
                "timeout": 5_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": 0, "records": build_batch([NewRecord(value=b"probe")])}
                        ],
                    }
                ],
            },
        )
    return int(response.responses[0].partition_responses[0].error_code)


def test_the_leader_dies_under_an_idempotent_acks_all_producer(start_server, tmp_path) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, "replica.lag.time.max.ms": "3000"},
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 3, config={"min.insync.replicas": "2"})])[
        "orders"
    ].result(15)
    wait_for(
        lambda: _leader_of(cluster.bootstrap, "orders")[1] == [1, 2, 3],
        timeout_s=15,
        what="the partition with three in-sync replicas",
    )
    leader, _ = _leader_of(cluster.bootstrap, "orders")
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 60_000,
        }
    )
    acknowledged: list[tuple[int, bytes]] = []
    failed: list[str] = []

    def report(error, message) -> None:
        if error is None:
            acknowledged.append((message.offset(), message.value()))
        else:
            failed.append(str(error))

    sent = [b"order-%05d" % index for index in range(3000)]
    for index, value in enumerate(sent):
        producer.produce("orders", value=value, on_delivery=report)
        producer.poll(0)
        if index == 1000:
            producer.flush(30)
            cluster.kill(leader)  # mid-stream, with batches in flight
    assert producer.flush(90) == 0
    assert not failed, failed[:5]
    assert len(acknowledged) == len(sent)
    new_leader, isr = _leader_of(cluster.bootstrap, "orders")
    assert new_leader not in (leader, -1) and leader not in isr

    # Every acknowledged record exactly once, in the order produced, at the offsets acknowledged.
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "audit",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("orders", 0, 0)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(read) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append((message.offset(), message.value()))
    consumer.close()
    assert [value for _, value in read] == sent
    assert sorted(acknowledged) == read

    # The killed broker comes back and its leader takes it back into the ISR.
    cluster.launch([leader])
    wait_for(
        lambda: _leader_of(cluster.bootstrap, "orders")[1] == [1, 2, 3],
        timeout_s=30,
        what=f"broker {leader} back in the ISR",
    )


def test_losing_two_of_three_replicas_refuses_acks_all_until_one_returns(
    start_server, tmp_path
) -> None:
    """Three voters keep the quorum; the topic's replicas are a voter and two broker-only
    nodes, so two replicas can go without the controller going too."""
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED, COMBINED, COMBINED, BROKER, BROKER],
        extra={**FAST, "replica.lag.time.max.ms": "3000"},
    )
    # (an explicit assignment on the wire: confluent-kafka 2.16 refuses its own NewTopic
    # with a replica assignment)
    with Connection("127.0.0.1", int(cluster.nodes[1].bootstrap.split(":")[1])) as connection:
        response = connection.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": "guarded",
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [1, 4, 5]}],
                        "configs": [{"name": "min.insync.replicas", "value": "2"}],
                    }
                ],
                "timeout": 15_000,
                "validate_only": False,
            },
        )
    assert response.topics[0].error_code == 0, response
    leader_node = cluster.nodes[1]
    wait_for(
        lambda: _leader_of(leader_node.bootstrap, "guarded") == (1, [1, 4, 5]),
        timeout_s=15,
        what="broker 1 leading three in-sync replicas",
    )
    # (the metadata answer may name the leader an instant before its replica manager leads:
    # NOT_LEADER_OR_FOLLOWER then, which a client retries)
    wait_for(
        lambda: _produce_raw(leader_node, "guarded", acks=-1) == ErrorCode.none,
        timeout_s=15,
        what="acks=all accepted by the leader of three in-sync replicas",
    )
    cluster.kill(4)
    cluster.kill(5)
    wait_for(
        lambda: _leader_of(leader_node.bootstrap, "guarded")[1] == [1],
        timeout_s=30,
        what="the ISR down to the leader",
    )
    assert _produce_raw(leader_node, "guarded", acks=-1) == ErrorCode.not_enough_replicas
    assert _produce_raw(leader_node, "guarded", acks=1) == ErrorCode.none
    cluster.launch([4])
    wait_for(
        lambda: _produce_raw(leader_node, "guarded", acks=-1) == ErrorCode.none,
        timeout_s=30,
        what="acks=all accepted again once a replica is back in sync",
    )


RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def test_redirects_name_the_leader_and_consumers_read_the_replica_in_their_rack(
    start_server, tmp_path
) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER comes with the current leader and its endpoint, in
    Produce (v10+) and Fetch (v16+) answers, so clients need no metadata round trip; an error
    partition carries an empty record set, never a null one. KIP-392: with the rack-aware
    selector the leader sends a consumer in another rack to the in-sync replica in its rack,
    which serves it up to its high watermark."""
    from moldau.protocol.records import NewRecord, build_batch

    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, "replica.selector.class": RACK_AWARE},
        per_node={n: {"broker.rack": f"rack-{n}"} for n in (1, 2, 3)},
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("redirected", num_partitions=1, replica_assignment=[[1, 2]])])[
        "redirected"
    ].result(15)
    wait_for(
        lambda: _leader_of(cluster.bootstrap, "redirected") == (1, [1, 2]),
        timeout_s=15,
        what="broker 1 leading with 2 in sync",
    )
    wait_for(
        lambda: _leader_of(cluster.nodes[3].bootstrap, "redirected")[0] == 1,
        timeout_s=15,
        what="broker 3's metadata",
    )
    leader_port = int(cluster.nodes[1].bootstrap.split(":")[1])
    with Connection("127.0.0.1", int(cluster.nodes[3].bootstrap.split(":")[1])) as connection:
        produced = connection.request(
            0,
            11,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {
                        "name": "redirected",
                        "partition_data": [
                            {"index": 0, "records": build_batch([NewRecord(value=b"x")])}
                        ],
                    }
                ],
            },
        )
        fetched = connection.request(
            1,
            16,
            {
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic_id": _topic_id(connection, "redirected"),
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )
    answer = produced.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.not_leader_or_follower
    assert answer.current_leader.leader_id == 1
    assert [(n.node_id, n.port) for n in produced.node_endpoints] == [(1, leader_port)]
    partition = fetched.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert partition.current_leader.leader_id == 1
    assert partition.records is not None and len(partition.records) == 0
    assert [(n.node_id, n.port) for n in fetched.node_endpoints] == [(1, leader_port)]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(50):
        producer.produce("redirected", value=b"record-%d" % index)
    assert producer.flush(30) == 0

    def fetch_in_rack(node_id: int, rack: str) -> Any:
        with Connection("127.0.0.1", int(cluster.nodes[node_id].bootstrap.split(":")[1])) as c:
            response = c.request(
                1,
                12,
                {
                    "max_wait": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "rack_id": rack,
                    "topics": [
                        {
                            "topic": "redirected",
                            "partitions": [
                                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                            ],
                        }
                    ],
                },
            )
        return response.responses[0].partitions[0]

    redirected = fetch_in_rack(1, "rack-2")
    assert (redirected.error_code, redirected.preferred_read_replica) == (0, 2)
    assert len(redirected.records) == 0
    local = fetch_in_rack(1, "rack-1")
    assert (local.error_code, local.preferred_read_replica) == (0, -1) and len(local.records) > 0
    wait_for(
        lambda: fetch_in_rack(2, "rack-2").high_watermark == 50,
        timeout_s=10,
        what="the follower's high watermark",
    )
    follower = fetch_in_rack(2, "rack-2")
    assert (follower.error_code, follower.preferred_read_replica) == (0, -1)
    assert follower.records == local.records  # the same batches, byte for byte

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "in-rack-2",
            "client.rack": "rack-2",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["redirected"])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.close()
    assert received == [b"record-%d" % index for index in range(50)]

    # Moldau's consumer and the Spark source's partition reader, in rack-2: the leader sends
    # them to broker 2, which serves the same records.
    settings = {"bootstrap.servers": cluster.bootstrap, "client.rack": "rack-2"}
    tp = MoldauTopicPartition("redirected", 0)
    with SyncConsumer({**settings, "auto.offset.reset": "earliest"}) as moldau_consumer:
        moldau_consumer.assign([tp])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 50 and time.monotonic() < deadline:
            values += [m.value() or b"" for m in moldau_consumer.consume(100, 0.5)]
        assert moldau_consumer.target._read_replicas.preferred(tp) == 2
    assert values == [b"record-%d" % index for index in range(50)]
    from moldau.spark.partition_reader import read_range
    from moldau.spark.planning import OffsetRange

    batches = list(read_range(settings, OffsetRange("redirected", 0, 0, 50)))
    assert [v.as_py() for b in batches for v in b.column("value")] == values

    async def fetch_twice() -> tuple[int | None, int]:
        async with PartitionFetcher(settings, tp) as fetcher:
            first = await fetcher.fetch(0, 1.0)  # the leader names broker 2 and sends nothing
            second = await fetcher.fetch(0, 1.0)  # broker 2 answers
            assert first is not None and second is not None and not first.records
            return fetcher.read_replicas.preferred(tp), len(second.records)

    preferred, size = asyncio.run(fetch_twice())
    assert preferred == 2 and size > 0


def _topic_id(connection: Connection, topic: str) -> object:
    response = connection.request(
        3, 12, {"topics": [{"topic_id": None, "name": topic}], "allow_auto_topic_creation": False}
    )
    return response.topics[0].topic_id


def test_committed_offsets_survive_the_death_of_the_group_coordinator(
    start_server, tmp_path
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, "group.initial.rebalance.delay.ms": "0"},
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("events", 3, 3)])["events"].result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(600):
        producer.produce("events", key=b"%d" % index, value=b"event-%d" % index)
    assert producer.flush(30) == 0

    def consume(count: int) -> list[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "survivors",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["events"])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
                if len(values) == count:
                    consumer.commit(asynchronous=False)
        consumer.close()
        return values

    first = consume(300)
    assert len(first) == 300
    group = admin.describe_consumer_groups(["survivors"])["survivors"].result(15)
    coordinator = group.coordinator.id
    cluster.kill(coordinator)
    rest = consume(300)
    assert len(rest) == 300
    # The committed offsets were on the replicated __consumer_offsets: nothing read twice,
    # nothing skipped.
    assert sorted(first + rest) == sorted(b"event-%d" % i for i in range(600))
    after = admin.describe_consumer_groups(["survivors"])["survivors"].result(15)
    assert after.coordinator.id != coordinator
