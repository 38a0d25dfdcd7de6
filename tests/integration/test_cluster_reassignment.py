"""Partition reassignments (KIP-455) in a cluster of real processes, driven by kafka-python's
admin client (confluent-kafka has no reassignment calls): a partition moves to other brokers
under an idempotent acks=all producer and loses and duplicates nothing; a reassignment that
cannot finish is listed and cancelled; bad targets get Kafka's errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as PythonPartition
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from .cluster import BROKER, COMBINED, Cluster, build_cluster, wait_for
from .test_cluster_replication import FAST, _segment_bytes


def _admin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)


def _describe(admin: KafkaAdminClient, topic: str) -> dict:
    """Partition 0's leader, replicas and ISR as the metadata gives them to clients."""
    [described] = admin.describe_topics([topic])
    [partition] = described["partitions"]
    return {
        "leader": partition["leader_id"],
        "replicas": list(partition["replica_nodes"]),
        "isr": list(partition["isr_nodes"]),
    }


def _create(admin: KafkaAdminClient, topic: str, replicas: list[int]) -> None:
    admin.create_topics([NewTopic(topic, replica_assignments={0: replicas})])
    wait_for(
        lambda: sorted(_describe(admin, topic)["isr"]) == sorted(replicas),
        timeout_s=20,
        what=f"{topic} with every replica in sync",
    )


def _value(index: int) -> bytes:
    return b"record-%07d:" % index + PADDING


PADDING = b"x" * 500


def _fenced(admin: KafkaAdminClient, broker_id: int) -> bool:
    """DescribeCluster (fenced brokers included) shows `broker_id` fenced or not at all."""
    brokers = admin.describe_cluster()["brokers"]
    return all(b["broker_id"] != broker_id or b.get("is_fenced") for b in brokers)


def _reassign_and_time(admin: KafkaAdminClient, tp: PythonPartition, target: list[int]) -> float:
    started = time.monotonic()
    assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
    wait_for(
        lambda: admin.list_partition_reassignments() == {},
        timeout_s=90,
        what=f"the reassignment of {tp} complete",
    )
    return time.monotonic() - started


def _wait_for_replicas(
    admin: KafkaAdminClient, topic: str, *, leader: int, replicas: list[int]
) -> None:
    """Until the metadata shows partition 0 with these replicas, all in sync, and leader."""
    expected = {"leader": leader, "replicas": replicas, "isr": sorted(replicas)}
    wait_for(
        lambda: _describe(admin, topic) == expected,
        timeout_s=10,
        what=f"{topic} on {replicas} led by {leader} in the metadata",
    )


class _Producing:
    """An idempotent acks=all producer writing numbered records in a thread until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self.acknowledged: list[tuple[int, bytes]] = []
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producing", daemon=True)

    def _report(self, error, message) -> None:
        if error is None:
            self.acknowledged.append((message.offset(), message.value()))
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(50):
                self.producer.produce(self.topic, value=_value(self.sent), on_delivery=self._report)
                self.sent += 1
            self.producer.poll(0.01)

    def __enter__(self) -> _Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(120)


def test_a_partition_moves_to_other_brokers_under_load_with_no_loss(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED, COMBINED, COMBINED, BROKER],
        extra={**FAST, "replica.lag.time.max.ms": "5000"},
    )
    admin = _admin(cluster)
    _create(admin, "moving", [1, 2, 3])
    assert _describe(admin, "moving")["leader"] == 1
    tp = PythonPartition("moving", 0)

    with _Producing(cluster.bootstrap, "moving") as producing:
        wait_for(lambda: len(producing.acknowledged) >= 20_000, timeout_s=90, what="20000 acks")
        started = time.monotonic()
        # 4 first: the leader (1) leaves, and the first target replica in the ISR takes over.
        assert admin.alter_partition_reassignments({tp: [4, 2, 3]}) == {tp: None}
        in_progress = admin.list_partition_reassignments()
        wait_for(
            lambda: admin.list_partition_reassignments() == {},
            timeout_s=90,
            what="the reassignment complete",
        )
        took = time.monotonic() - started
        acknowledged_at_completion = len(producing.acknowledged)
        wait_for(
            lambda: len(producing.acknowledged) >= acknowledged_at_completion + 3000,
            timeout_s=60,
            what="3000 more acks from the new leader",
        )
    print(
        f"reassignment under load took {took:.2f} s; {len(producing.acknowledged)} acks; "
        f"listed in progress: {in_progress}"
    )

    # (listed right after it started unless it had already finished: 4 catches up fast)
    if in_progress:
        assert in_progress == {
            tp: {"replicas": [4, 2, 3, 1], "adding_replicas": [4], "removing_replicas": [1]}
        }
    _wait_for_replicas(admin, "moving", leader=4, replicas=[4, 2, 3])
    assert not producing.failed, producing.failed[:5]
    assert len(producing.acknowledged) == producing.sent

    # Every acknowledged record exactly once, in order, at its offset, read from the new replicas.
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "audit",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ConfluentPartition("moving", 0, 0)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    while len(read) < producing.sent and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append((message.offset(), message.value()))
    consumer.close()
    assert [value for _, value in read] == [_value(i) for i in range(producing.sent)]
    assert [offset for offset, _ in read] == list(range(producing.sent))
    assert sorted(producing.acknowledged) == read

    # The old replica's log is gone; the new ones are byte for byte the leader's.
    wait_for(
        lambda: not (cluster.nodes[1].data_dir / "moving-0").exists(),
        timeout_s=20,
        what="broker 1's log of moving-0 deleted",
    )
    wait_for(
        lambda: len({_segment_bytes(cluster, "moving", 0)[n] for n in (2, 3, 4)}) == 1,
        timeout_s=30,
        what="replicas 2, 3 and 4 identical",
    )
    assert _segment_bytes(cluster, "moving", 0)[4]
    admin.close()


def test_a_reassignment_that_cannot_finish_is_listed_and_cancelled(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(
        start_server, tmp_path, roles=[COMBINED, COMBINED, COMBINED, BROKER], extra=FAST
    )
    admin = _admin(cluster)
    _create(admin, "staying", [1, 2, 3])
    admin.close()
    tp = PythonPartition("staying", 0)
    cluster.stop(4)  # registered but fenced: it cannot catch up
    bootstrap = ",".join(cluster.nodes[n].bootstrap for n in (1, 2, 3))
    wait_for(
        lambda: (
            4 not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers
        ),
        timeout_s=20,
        what="broker 4 fenced",
    )
    # (a new client: kafka-python keeps sending admin requests to the broker the metadata named
    # the controller when it started, which may have been broker 4)
    admin = _admin(cluster)

    assert admin.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
    listed = {"replicas": [1, 2, 4, 3], "adding_replicas": [4], "removing_replicas": [3]}
    assert admin.list_partition_reassignments() == {tp: listed}
    assert admin.list_partition_reassignments({"staying": [0]}) == {tp: listed}
    wait_for(
        lambda: _describe(admin, "staying")["replicas"] == [1, 2, 4, 3],
        timeout_s=10,
        what="the reassigning replicas in the metadata",
    )

    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    assert admin.list_partition_reassignments() == {}
    _wait_for_replicas(admin, "staying", leader=1, replicas=[1, 2, 3])
    assert admin.alter_partition_reassignments({tp: None}) == {
        tp: kafka_errors.NoReassignmentInProgressError
    }

    # Kafka's errors for bad targets; nothing starts.
    results = admin.alter_partition_reassignments(
        {
            tp: [1, 2, 2],
            PythonPartition("staying", 5): [1, 2, 3],
            PythonPartition("no-such-topic", 0): [1, 2, 3],
        }
    )
    assert results == {
        tp: kafka_errors.InvalidReplicationAssignmentError,
        PythonPartition("staying", 5): kafka_errors.UnknownTopicOrPartitionError,
        PythonPartition("no-such-topic", 0): kafka_errors.UnknownTopicOrPartitionError,
    }
    assert admin.alter_partition_reassignments({tp: [1, 2, 9]}) == {
        tp: kafka_errors.InvalidReplicationAssignmentError
    }
    assert admin.list_partition_reassignments() == {}

    # Broker 4 back: a reassignment to it completes and broker 3 drops its replica.
    cluster.launch([4])
    _reassign_and_time(admin, tp, [1, 2, 4])
    _wait_for_replicas(admin, "staying", leader=1, replicas=[1, 2, 4])
    wait_for(
        lambda: not (cluster.nodes[3].data_dir / "staying-0").exists(),
        timeout_s=20,
        what="broker 3's log of staying-0 deleted",
    )
    admin.close()


def _set_broker_config(admin: KafkaAdminClient, broker_id: int, configs: dict) -> None:
    """IncrementalAlterConfigs of one broker's dynamic configs (("DELETE", None) removes). The
    throttle rates are listed by DescribeConfigs only once set (as Kafka's brokers list them),
    so kafka-python's check of the names against that list is skipped."""
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(broker_id), configs=configs)],
        raise_on_unknown=False,
    )
    print("alter_configs", result)
    assert all(
        outcome in (None, kafka_errors.NoError) or getattr(outcome, "errno", 0) == 0
        for by_name in result.values()
        for outcome in by_name.values()
    ), result


def test_replication_throttles_hold_a_new_replica_to_the_rate(start_server, tmp_path) -> None:
    """A leader throttle (broker 1's leader.replication.throttled.rate over a topic's
    leader.replication.throttled.replicas), then a follower throttle (broker 4's
    follower.replication.throttled.rate over follower.replication.throttled.replicas), each
    hold a 3 MiB catch-up to about 256 KiB/s where it takes well under a second unthrottled."""
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED, COMBINED, COMBINED, BROKER],
        extra={
            **FAST,
            "replica.fetch.max.bytes": "65536",
            "replication.quota.window.num": "2",
        },
    )
    admin = _admin(cluster)
    topics = {
        "led": {"leader.replication.throttled.replicas": "*"},
        "followed": {"follower.replication.throttled.replicas": "0:4"},
        "free": {},
    }
    for topic, configs in topics.items():
        admin.create_topics(
            [NewTopic(topic, replica_assignments={0: [1, 2, 3]}, topic_configs=configs)]
        )
    for topic in topics:
        wait_for(
            lambda t=topic: sorted(_describe(admin, t)["isr"]) == [1, 2, 3],
            timeout_s=20,
            what=f"{topic} in sync",
        )
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for topic in topics:
        for index in range(3072):
            producer.produce(topic, value=b"%06d" % index + b"y" * 1018)
            producer.poll(0)
    assert producer.flush(60) == 0

    unthrottled = _reassign_and_time(admin, PythonPartition("free", 0), [1, 2, 4])

    rate = str(256 * 1024)
    _set_broker_config(admin, 1, {"leader.replication.throttled.rate": rate})
    led = _reassign_and_time(admin, PythonPartition("led", 0), [1, 2, 4])
    _set_broker_config(admin, 1, {"leader.replication.throttled.rate": ("DELETE", None)})
    _set_broker_config(admin, 4, {"follower.replication.throttled.rate": rate})
    followed = _reassign_and_time(admin, PythonPartition("followed", 0), [1, 2, 4])
    print(
        f"3 MiB catch-up: {unthrottled:.2f} s free, {led:.2f} s under the leader throttle, "
        f"{followed:.2f} s under the follower throttle"
    )
    assert unthrottled < 3
    assert led > 4 and followed > 4
    for topic in topics:
        wait_for(
            lambda t=topic: len({_segment_bytes(cluster, t, 0)[n] for n in (1, 2, 4)}) == 1,
            timeout_s=30,
            what=f"{topic}'s replicas identical",
        )
    admin.close()


def test_a_leaving_broker_that_was_down_deletes_its_log_when_it_comes_back(
    start_server, tmp_path
) -> None:
    """Broker 3 is killed (and fenced) mid-way: the reassignment away from it completes without
    it, and when it starts again the metadata no longer gives it the partition, so it deletes
    the log it left behind."""
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED, COMBINED, COMBINED, BROKER],
        extra={**FAST, "replica.lag.time.max.ms": "3000"},
    )
    admin = _admin(cluster)
    _create(admin, "leaving", [1, 2, 3])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(500):
        producer.produce("leaving", value=b"%06d" % index)
    assert producer.flush(30) == 0
    wait_for(
        lambda: len({_segment_bytes(cluster, "leaving", 0)[n] for n in (1, 2, 3)}) == 1,
        timeout_s=20,
        what="broker 3's replica caught up",
    )
    assert (cluster.nodes[3].data_dir / "leaving-0").exists()
    admin.close()
    cluster.kill(3)
    # kafka-python's admin sends to one broker the metadata names and does not retry another:
    # wait until broker 3 is fenced (gone from the metadata), as an operator would.
    admin = KafkaAdminClient(
        bootstrap_servers=cluster.bootstrap_without(3), request_timeout_ms=15_000
    )
    wait_for(lambda: _fenced(admin, 3), timeout_s=30, what="broker 3 fenced")
    tp = PythonPartition("leaving", 0)

    _reassign_and_time(admin, tp, [1, 2, 4])  # (without broker 3)
    _wait_for_replicas(admin, "leaving", leader=1, replicas=[1, 2, 4])
    assert (cluster.nodes[3].data_dir / "leaving-0").exists()  # (it was down)

    cluster.launch([3])
    wait_for(
        lambda: not (cluster.nodes[3].data_dir / "leaving-0").exists(),
        timeout_s=30,
        what="broker 3's stray log deleted at its start",
    )
    assert _segment_bytes(cluster, "leaving", 0)[4] == _segment_bytes(cluster, "leaving", 0)[1]
    admin.close()
