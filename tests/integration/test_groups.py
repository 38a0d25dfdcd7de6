"""Consumer groups with real clients against a real server: rebalancing, failover, offsets.

Session timeouts are short (the server allows 1 s and up) so a killed member's partitions move
within seconds; `group.initial.rebalance.delay.ms=0` lets a group form as soon as its members
have joined.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .conftest import MoldauServer, ServerFactory
from .rdkafka import create_topic
from .support import wait_until

GROUP_SETTINGS = {
    "group_initial_rebalance_delay_ms": "0",
    "group_min_session_timeout_ms": "1000",
    "group_consumer_heartbeat_interval_ms": "500",
}
SESSION_TIMEOUT_MS = 3000
PARTITIONS = 6


@pytest.fixture(scope="module")
def group_server(module_server_factory: ServerFactory) -> MoldauServer:
    return module_server_factory(**GROUP_SETTINGS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(
    bootstrap: str, topic: str, count: int, *, start: int = 0, partitions: int = PARTITIONS
) -> set[tuple[int, int]]:
    """Write `count` records round-robin over the partitions; the acknowledged (partition, offset)."""
    acknowledged: set[tuple[int, int]] = set()

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        acknowledged.add((message.partition(), message.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(start, start + count):
        producer.produce(
            topic,
            value=f"record-{index}".encode(),
            partition=index % partitions,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acknowledged) == count
    return acknowledged


def group_consumer(bootstrap: str, group_id: str, **extra: Any) -> Consumer:
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 300,
        "enable.auto.commit": False,
        **extra,
    }
    return Consumer(settings)


def poll_all(consumers: list[Consumer], seconds: float = 0.05) -> list[Any]:
    """What each consumer has ready now (up to 1,000 records), waiting at most `seconds` each."""
    messages = []
    for consumer in consumers:
        for message in consumer.consume(num_messages=1000, timeout=seconds):
            if message.error() is None:
                messages.append(message)
    return messages


def assignments(consumers: list[Consumer]) -> list[list[int]]:
    return [sorted(tp.partition for tp in consumer.assignment()) for consumer in consumers]


def wait_for_split(
    consumers: list[Consumer],
    sizes: list[int],
    *,
    partitions: int = PARTITIONS,
    timeout: float = 30.0,
) -> list[list[int]]:
    """Poll every consumer until their assignments have `sizes` and cover every partition once."""

    def split() -> list[list[int]] | None:
        poll_all(consumers)
        current = assignments(consumers)
        flat = sorted(p for assigned in current for p in assigned)
        if sorted(len(p) for p in current) == sorted(sizes) and flat == list(range(partitions)):
            return current
        return None

    result = wait_until(split, timeout=timeout, message=f"assignment {sizes}")
    assert isinstance(result, list)
    return result


# --------------------------------------------------------------------- SIGKILL and failover

MEMBER_SCRIPT = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, topic, group_id, session_timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()

def on_assign(consumer, partitions):
    emit(assigned=sorted(p.partition for p in partitions))

def on_revoke(consumer, partitions):
    emit(assigned=[])

consumer = Consumer({
    "bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
    "session.timeout.ms": session_timeout, "heartbeat.interval.ms": 300,
    "enable.auto.commit": True, "auto.commit.interval.ms": 200,
})
consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while True:
    message = consumer.poll(0.1)
    if message is not None and message.error() is None:
        emit(consumed=[message.partition(), message.offset()])
"""


class MemberProcess:
    """A confluent-kafka group member in its own process, reporting events as JSON lines."""

    def __init__(self, bootstrap: str, topic: str, group_id: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                MEMBER_SCRIPT,
                bootstrap,
                topic,
                group_id,
                str(SESSION_TIMEOUT_MS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.assigned: list[int] = []
        self.consumed: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self._lock:
                if "assigned" in event:
                    self.assigned = event["assigned"]
                else:
                    self.consumed.append(tuple(event["consumed"]))

    def snapshot(self) -> tuple[list[int], list[tuple[int, int]]]:
        with self._lock:
            return list(self.assigned), list(self.consumed)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def members() -> Iterator[list[MemberProcess]]:
    started: list[MemberProcess] = []
    yield started
    for member in started:
        member.stop()


class BackgroundProducer:
    """Keeps writing round-robin until stopped; remembers every acknowledged (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acknowledged: set[tuple[int, int]] = set()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: Any, message: Any) -> None:
        assert error is None, error
        self.acknowledged.add((message.partition(), message.offset()))

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            self._producer.produce(
                self._topic,
                value=f"live-{index}".encode(),
                partition=index % PARTITIONS,
                on_delivery=self._delivered,
            )
            index += 1
            self._producer.poll(0.02)  # paces the writer and serves delivery reports
        assert self._producer.flush(30) == 0

    def stop(self) -> set[tuple[int, int]]:
        self._stop.set()
        self._thread.join(60)
        return set(self.acknowledged)


def test_three_members_split_six_partitions_and_take_over_after_sigkill(
    group_server: MoldauServer, members: list[MemberProcess]
) -> None:
    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-failover"), unique("failover")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    written = produce(bootstrap, topic, 120)
    members.extend(MemberProcess(bootstrap, topic, group_id) for _ in range(3))

    def split_in(group: list[MemberProcess], size: int) -> bool:
        current = [member.snapshot()[0] for member in group]
        flat = sorted(p for partitions in current for p in partitions)
        return all(len(p) == size for p in current) and flat == list(range(PARTITIONS))

    wait_until(lambda: split_in(members, 2), timeout=40, message="three members with two each")
    victim, survivors = members[0], members[1:]
    victims_partitions = victim.snapshot()[0]
    producer = BackgroundProducer(bootstrap, topic)  # keeps writing through the failover
    victim.kill()
    killed_at = time.monotonic()
    wait_until(lambda: split_in(survivors, 3), timeout=40, message="survivors with three each")
    # No LeaveGroup was sent: the move waits for the session timeout.
    assert time.monotonic() - killed_at >= SESSION_TIMEOUT_MS / 1000 * 0.5
    taken_over = {p for member in survivors for p in member.snapshot()[0]}
    assert set(victims_partitions) <= taken_over
    written |= producer.stop()

    def everything_consumed() -> bool:
        seen = {record for member in members for record in member.snapshot()[1]}
        return written <= seen

    wait_until(everything_consumed, timeout=40, message="every written record consumed")
    counts = Counter(record for member in members for record in member.snapshot()[1])
    lost = written - set(counts)
    assert not lost, f"{len(lost)} acknowledged records never consumed"
    duplicates = sum(count - 1 for count in counts.values())
    assert duplicates < len(written)  # re-delivery after the kill only, not a re-read of all


# ------------------------------------------------------------------ offset reset and seeking


def test_auto_offset_reset_and_seek(group_server: MoldauServer) -> None:
    from confluent_kafka import KafkaException

    bootstrap = group_server.bootstrap_servers
    topic = unique("groups-reset")
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, 10, partitions=1)

    def first_offset(consumer: Consumer) -> int:
        found: list[int] = []

        def read() -> bool:
            found.extend(m.offset() for m in poll_all([consumer], 0.1))
            return bool(found)

        wait_until(read, timeout=30, message="a record")
        return found[0]

    earliest = group_consumer(bootstrap, unique("earliest"))
    earliest.subscribe([topic])
    assert first_offset(earliest) == 0
    earliest.close()

    latest = group_consumer(bootstrap, unique("latest"), **{"auto.offset.reset": "latest"})
    latest.subscribe([topic])
    wait_for_split([latest], [1], partitions=1)
    found: list[int] = []
    next_index = 10

    def reads_only_new_records() -> bool:
        nonlocal next_index  # keep writing until the reset to the end has happened
        produce(bootstrap, topic, 1, start=next_index, partitions=1)
        next_index += 1
        found.extend(m.offset() for m in poll_all([latest], 0.2))
        return bool(found)

    wait_until(reads_only_new_records, timeout=30, message="a new record with reset=latest")
    assert found[0] >= 10  # nothing from before the consumer started
    latest.seek(TopicPartition(topic, 0, 3))  # rewind: history is read again
    assert first_offset(latest) == 3
    latest.close()

    strict = group_consumer(bootstrap, unique("none"), **{"auto.offset.reset": "error"})
    strict.subscribe([topic])
    errors: list[Any] = []

    def refused() -> bool:
        try:
            message = strict.poll(0.1)
        except KafkaException as error:
            errors.append(error)
            return True
        if message is not None and message.error() is not None:
            errors.append(message.error())
        return bool(errors)

    wait_until(refused, timeout=30, message="no committed offset and reset=none fails")
    assert "offset" in str(errors[0]).lower()
    strict.close()


# ---------------------------------------------------------------------- offsets and restart


def test_committed_offsets_and_group_survive_a_restart(start_server: ServerFactory) -> None:
    server = start_server(**GROUP_SETTINGS)
    topic, group_id = unique("groups-restart"), unique("restart")
    create_topic(server.bootstrap_servers, topic, partitions=PARTITIONS)
    produce(server.bootstrap_servers, topic, 60)
    consumer = group_consumer(server.bootstrap_servers, group_id)
    consumer.subscribe([topic])
    wait_for_split([consumer], [PARTITIONS])
    offsets = [TopicPartition(topic, p, 2 + p) for p in range(PARTITIONS)]
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()

    server.restart()
    fresh = group_consumer(server.bootstrap_servers, group_id)
    committed = fresh.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    assert [(tp.partition, tp.offset) for tp in committed] == [
        (p, 2 + p) for p in range(PARTITIONS)
    ]
    fresh.subscribe([topic])
    first_offsets: dict[int, int] = {}

    def resumed() -> bool:
        for message in poll_all([fresh]):
            first_offsets.setdefault(message.partition(), message.offset())
        return len(first_offsets) == PARTITIONS

    wait_until(resumed, timeout=30, message="resume from committed offsets")
    assert first_offsets == {p: 2 + p for p in range(PARTITIONS)}
    fresh.close()
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})  # outlives its future
    listed = admin.list_consumer_groups().result(20).valid
    assert group_id in {group.group_id for group in listed}


def test_unknown_group_has_no_committed_offsets(group_server: MoldauServer) -> None:
    topic = unique("groups-unknown")
    create_topic(group_server.bootstrap_servers, topic, partitions=2)
    consumer = group_consumer(group_server.bootstrap_servers, unique("never-committed"))
    committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=20)
    assert [tp.offset for tp in committed] == [-1001, -1001]  # librdkafka's "no offset"
    assert all(tp.error is None for tp in committed)
    consumer.close()


# --------------------------------------------------------------------- assignors and statics


def test_cooperative_sticky_rebalance_keeps_owned_partitions(group_server: MoldauServer) -> None:
    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-coop"), unique("coop")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    settings = {"partition.assignment.strategy": "cooperative-sticky"}
    first = group_consumer(bootstrap, group_id, **settings)
    first.subscribe([topic])
    wait_for_split([first], [PARTITIONS])
    second = group_consumer(bootstrap, group_id, **settings)
    second.subscribe([topic])
    split = wait_for_split([first, second], [3, 3])
    assert set(split[0]) <= set(range(PARTITIONS))
    second.close()
    wait_for_split([first], [PARTITIONS])
    first.close()


def test_static_member_restart_keeps_partitions_without_rebalance(
    group_server: MoldauServer,
) -> None:
    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-static"), unique("static")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    settings = {"session.timeout.ms": 10_000}
    steady_assignments: list[list[int]] = []
    steady = group_consumer(bootstrap, group_id, **settings, **{"group.instance.id": "steady"})
    steady.subscribe(
        [topic],
        on_assign=lambda _c, parts: steady_assignments.append(sorted(p.partition for p in parts)),
    )
    restarting = group_consumer(
        bootstrap, group_id, **settings, **{"group.instance.id": "restarting"}
    )
    restarting.subscribe([topic])
    before = wait_for_split([steady, restarting], [3, 3])
    assignments_before = len(steady_assignments)
    restarting.close()  # a static member sends no LeaveGroup
    again = group_consumer(bootstrap, group_id, **settings, **{"group.instance.id": "restarting"})
    again.subscribe([topic])
    after = wait_for_split([steady, again], [3, 3])
    assert after == before
    for _ in range(20):
        poll_all([steady, again])
    assert len(steady_assignments) == assignments_before  # the steady member never rebalanced
    steady.close()
    again.close()


def test_consumer_protocol_group_splits_partitions(group_server: MoldauServer) -> None:
    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-kip848"), unique("kip848")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    written = produce(bootstrap, topic, 60)
    settings = {"group.protocol": "consumer"}
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                **settings,
            }
        )
        for _ in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe([topic])
    seen: set[tuple[int, int]] = set()

    def balanced_and_read() -> bool:
        seen.update((m.partition(), m.offset()) for m in poll_all(consumers))
        sizes = sorted(len(a) for a in assignments(consumers))
        return sizes == [3, 3] and written <= seen

    wait_until(balanced_and_read, timeout=40, message="two consumer-protocol members, 3 each")
    consumers[1].close()  # leaves with member epoch -1: its partitions move to the other member
    wait_until(
        lambda: poll_all(consumers[:1]) is not None and assignments(consumers[:1]) == [[*range(6)]],
        timeout=30,
        message="the remaining member takes every partition",
    )
    consumers[0].close()


# ----------------------------------------------------------------------- other client families


def test_kafka_python_group_consumes_and_commits(group_server: MoldauServer) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as PythonTopicPartition

    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-kafka-python"), unique("kafka-python")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    written = produce(bootstrap, topic, 60)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=300,
    )
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 40
    while not written <= seen and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen.update((record.partition, record.offset) for record in records)
    assert written <= seen
    consumer.commit()
    committed = consumer.committed(PythonTopicPartition(topic, 0))
    assert committed == 10
    consumer.close()


def test_aiokafka_members_split_partitions(group_server: MoldauServer) -> None:
    from aiokafka import AIOKafkaConsumer

    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-aiokafka"), unique("aiokafka")
    create_topic(bootstrap, topic, partitions=PARTITIONS)

    async def scenario() -> list[list[int]]:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group_id,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                heartbeat_interval_ms=300,
            )
            for _ in range(2)
        ]
        for consumer in consumers:
            await consumer.start()
        try:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
                current = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
                if sorted(len(p) for p in current) == [3, 3]:
                    return current
            raise AssertionError(f"no 3/3 split: {current}")
        finally:
            for consumer in consumers:
                await consumer.stop()

    split = asyncio.run(scenario())
    assert sorted(split[0] + split[1]) == list(range(PARTITIONS))


# ---------------------------------------------------------------------------------- admin


def test_admin_lists_describes_and_deletes_groups(group_server: MoldauServer) -> None:
    bootstrap = group_server.bootstrap_servers
    topic, group_id = unique("groups-admin"), unique("admin")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    consumer = group_consumer(bootstrap, group_id)
    consumer.subscribe([topic])
    wait_for_split([consumer], [PARTITIONS])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group_id])[group_id].result(20)
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 1
    assert len(described.members[0].assignment.topic_partitions) == PARTITIONS
    refused = admin.delete_consumer_groups([group_id])[group_id]
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        refused.result(20)
    consumer.close()
    admin.delete_consumer_groups([group_id])[group_id].result(20)
    listed = admin.list_consumer_groups().result(20).valid
    assert group_id not in {group.group_id for group in listed}


def test_consumer_protocol_regex_subscription(group_server: MoldauServer) -> None:
    bootstrap = group_server.bootstrap_servers
    prefix = unique("groups-regex")
    for suffix in ("a", "b"):
        create_topic(bootstrap, f"{prefix}-{suffix}", partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("regex"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([f"^{prefix}-.*"])

    def assigned() -> set[tuple[str, int]]:
        poll_all([consumer])
        return {(tp.topic, tp.partition) for tp in consumer.assignment()}

    expected = {(f"{prefix}-{s}", p) for s in ("a", "b") for p in (0, 1)}
    wait_until(lambda: assigned() == expected, timeout=30, message="both matching topics")
    consumer.close()


# ------------------------------------------------------------------------ deleted topics


def test_deleting_a_topic_deletes_its_committed_offsets_and_groups_left_without_any(
    group_server: MoldauServer,
) -> None:
    """As Kafka: the offsets of a deleted topic's partitions go with it, and a group left with
    neither members nor offsets disappears; a group with offsets of other topics keeps those."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    bootstrap = group_server.bootstrap_servers
    doomed, kept = unique("groups-doomed"), unique("groups-kept")
    only_doomed, both = unique("only-doomed"), unique("both")
    create_topic(bootstrap, doomed, partitions=2)
    create_topic(bootstrap, kept, partitions=1)
    for group_id, topics in ((only_doomed, [doomed]), (both, [doomed, kept])):
        consumer = group_consumer(bootstrap, group_id)
        offsets = [TopicPartition(t, p, 5) for t in topics for p in range(2 if t == doomed else 1)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # outlives its futures

    def group_ids() -> set[str]:
        return {group.group_id for group in admin.list_consumer_groups().result(20).valid}

    def committed(group_id: str) -> dict[tuple[str, int], int]:
        request = ConsumerGroupTopicPartitions(group_id)
        answer = admin.list_consumer_group_offsets([request])[group_id].result(20)
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}

    assert {only_doomed, both} <= group_ids()
    assert committed(both) == {(doomed, 0): 5, (doomed, 1): 5, (kept, 0): 5}
    admin.delete_topics([doomed], operation_timeout=20)[doomed].result(20)
    wait_until(
        lambda: only_doomed not in group_ids(),
        timeout=30,
        message="a group whose only offsets were of the deleted topic is still listed",
    )
    assert both in group_ids()
    assert committed(both) == {(kept, 0): 5}
    create_topic(bootstrap, doomed, partitions=2)  # a new topic of that name starts afresh
    fresh = group_consumer(bootstrap, both)
    answer = fresh.committed([TopicPartition(doomed, 0), TopicPartition(doomed, 1)], timeout=20)
    assert [tp.offset for tp in answer] == [-1001, -1001]
    fresh.close()
