"""Share groups (KIP-932) against a real `moldau server`, with the clients that speak them: Kafka
4.1.1's KafkaShareConsumer (`tests/java/ShareConsumerApp.java`, one JVM per member) and
librdkafka's share consumer (confluent-kafka 2.16's `ShareConsumer`), plus Kafka's
`kafka-share-groups` tool.

Proven here: members of one group on a one-partition topic share its records (each delivered
and acknowledged once, the union what was produced, more than one member served); a member that
hangs while holding records loses them when their lock runs out, and another gets them with
delivery count 2; a member that is killed loses them as soon as its connection closes; rejected
records are never delivered again; a record always released stops after
`group.share.delivery.count.limit` deliveries. The server runs with a short minimum lock
duration and a delivery limit of 3; each test's group sets its own lock duration (a group
config) and starts at the earliest offset.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from .kafka_jvm import JAVA_DIR, KafkaJvm
from .share_groups import available, members_of, produce, share_topic
from .support import wait_until

DELIVERY_LIMIT = 3
SERVER_SETTINGS = {
    "group_share_min_record_lock_duration_ms": "1000",
    "group_share_delivery_count_limit": str(DELIVERY_LIMIT),
}


@pytest.fixture(scope="module")
def share_server(module_server_factory: Any) -> Any:
    return module_server_factory(**SERVER_SETTINGS)


class JavaMember:
    """One KafkaShareConsumer (`ShareConsumerApp.java`) and the events it printed."""

    def __init__(
        self, kafka_jvm: KafkaJvm, bootstrap: str, group: str, topic: str, mode: str, log: Path
    ) -> None:
        self.mode = mode
        self.log = log
        self.events: list[dict[str, Any]] = []
        self.process = kafka_jvm.start(
            str(JAVA_DIR / "ShareConsumerApp.java"), [bootstrap, group, topic, mode], log_path=log
        )
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == event]

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.of("record")

    @property
    def acknowledged(self) -> list[dict[str, Any]]:
        return self.of("acknowledged")

    def wait_for(
        self, condition: Callable[[JavaMember], bool], what: str, timeout: float = 60
    ) -> None:
        def check() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the {self.mode} member exited: {self.log.read_text()[-3000:]}"
                )
            return condition(self)

        wait_until(check, timeout=timeout, message=f"the {self.mode} member: {what}")

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)


@pytest.fixture
def java_members(
    kafka_jvm: KafkaJvm, share_server: Any, tmp_path: Path
) -> Iterator[Callable[..., JavaMember]]:
    started: list[JavaMember] = []

    def start(group: str, topic: str, mode: str) -> JavaMember:
        log = tmp_path / f"member-{len(started)}-{mode}.log"
        member = JavaMember(kafka_jvm, share_server.bootstrap_servers, group, topic, mode, log)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


# ------------------------------------------------------------------ Kafka's KafkaShareConsumer


def test_share_consumers_split_one_partition_and_acknowledge_each_record_once(
    share_server: Any, java_members: Callable[..., JavaMember], kafka_jvm: KafkaJvm
) -> None:
    topic, group = share_topic(share_server)
    members = [java_members(group, topic, "accept") for _ in range(3)]
    wait_until(lambda: len(members_of(share_server, group)) == 3, timeout=90, message="3 members")
    values = [f"job-{index}" for index in range(600)]
    produce(share_server, topic, values, batches=12)

    def acknowledged() -> list[str]:
        return [event["value"] for member in members for event in member.acknowledged]

    wait_until(lambda: len(acknowledged()) >= len(values), timeout=90, message="every job done")
    time.sleep(0.5)  # (nothing more may come)
    assert sorted(acknowledged()) == sorted(values)  # each once, the union what was produced
    delivered = [event for member in members for event in member.records]
    assert Counter(event["offset"] for event in delivered).most_common(1)[0][1] == 1
    assert {event["delivery"] for event in delivered} == {1}
    served = [len(member.acknowledged) for member in members]
    assert sum(1 for count in served if count) >= 2, served
    assert available(share_server, group, topic) == []

    with kafka_jvm.shell() as shell:
        where = ("--bootstrap-server", share_server.bootstrap_servers)
        listed = shell.tool("kafka-share-groups", *where, "--list").stdout.split()
        assert group in listed
        state = shell.tool("kafka-share-groups", *where, "--describe", "--group", group, "--state")
        assert [row.split()[-2:] for row in state.stdout.splitlines() if group in row] == [
            ["Stable", "3"]
        ]
        described = shell.tool(
            "kafka-share-groups", *where, "--describe", "--group", group, "--members"
        ).stdout
        rows = [row.split() for row in described.splitlines() if row.startswith(group)]
        assert len(rows) == 3 and all(row[-1] == f"{topic}:0" for row in rows), described


def test_records_held_by_a_hung_member_go_to_another_when_their_lock_expires(
    share_server: Any, java_members: Callable[..., JavaMember]
) -> None:
    topic, group = share_topic(share_server, lock_ms=2000)
    holder = java_members(group, topic, "hold")
    values = [f"task-{index}" for index in range(10)]
    produce(share_server, topic, values)
    holder.wait_for(lambda m: len(m.records) == len(values), "holding every record")
    holder.freeze()  # its connection stays open: only the lock can free the records
    taker = java_members(group, topic, "accept")
    taker.wait_for(lambda m: len(m.acknowledged) == len(values), "taking the records over")
    assert sorted(e["value"] for e in taker.acknowledged) == sorted(values)
    assert {e["delivery"] for e in taker.acknowledged} == {2}
    holder.kill()


def test_records_of_a_killed_member_are_released_when_its_connection_closes(
    share_server: Any, java_members: Callable[..., JavaMember]
) -> None:
    topic, group = share_topic(share_server, lock_ms=60_000)
    holder = java_members(group, topic, "hold")
    values = [f"task-{index}" for index in range(10)]
    produce(share_server, topic, values)
    holder.wait_for(lambda m: len(m.records) == len(values), "holding every record")
    holder.kill()
    killed_at = time.monotonic()
    taker = java_members(group, topic, "accept")
    taker.wait_for(lambda m: len(m.acknowledged) == len(values), "taking the records over", 50)
    assert time.monotonic() - killed_at < 60  # well before the 60 s lock would have run out
    assert {e["delivery"] for e in taker.acknowledged} == {2}


def test_rejected_records_are_never_delivered_again(
    share_server: Any, java_members: Callable[..., JavaMember]
) -> None:
    topic, group = share_topic(share_server)
    values = ["good-1", "bad-1", "good-2", "bad-2", "good-3", "bad-3"]
    member = java_members(group, topic, "reject")
    produce(share_server, topic, values)
    member.wait_for(lambda m: len(m.acknowledged) == len(values), "every record handled")
    time.sleep(1.5)
    assert sorted(e["value"] for e in member.records) == sorted(values)  # once each
    assert available(share_server, group, topic) == []


def test_a_record_always_released_stops_at_the_delivery_limit(
    share_server: Any, java_members: Callable[..., JavaMember]
) -> None:
    topic, group = share_topic(share_server)
    member = java_members(group, topic, "release")
    produce(share_server, topic, ["poison"])
    member.wait_for(lambda m: len(m.acknowledged) == DELIVERY_LIMIT, "the last delivery")
    time.sleep(1.5)
    assert [e["delivery"] for e in member.records] == list(range(1, DELIVERY_LIMIT + 1))
    assert available(share_server, group, topic) == []


def test_implicit_acknowledgement_accepts_what_was_delivered(
    share_server: Any, java_members: Callable[..., JavaMember]
) -> None:
    topic, group = share_topic(share_server)
    member = java_members(group, topic, "implicit")
    values = [f"event-{index}" for index in range(20)]
    produce(share_server, topic, values)
    member.wait_for(lambda m: len(m.records) == len(values), "every record")
    member.stop()  # (closing acknowledges the last poll's records)
    assert available(share_server, group, topic) == []


# ---------------------------------------------------------------- librdkafka's share consumer


def rdkafka_member(server: Any, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": server.bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    return consumer


def test_librdkafka_share_consumers_share_the_records_and_a_released_one_comes_back(
    share_server: Any,
) -> None:
    topic, group = share_topic(share_server)
    first, second = (
        rdkafka_member(share_server, group, topic),
        rdkafka_member(share_server, group, topic),
    )
    try:
        wait_until(
            lambda: len(members_of(share_server, group)) == 2, timeout=30, message="2 members"
        )
        values = [f"item-{index}" for index in range(200)] + ["once-more"]
        produce(share_server, topic, values, batches=10)
        handled: dict[str, list[tuple[str, int]]] = {"first": [], "second": []}
        released = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(map(len, handled.values())) < len(values) + 1:
            for name, consumer in (("first", first), ("second", second)):
                for message in consumer.poll(0.2) or []:
                    assert message.error() is None, message.error()
                    value = message.value().decode()
                    handled[name].append((value, message.offset()))
                    if value == "once-more" and not released:
                        consumer.acknowledge(message, AcknowledgeType.RELEASE)  # delivered again
                        released = True
                    else:
                        consumer.acknowledge(message)
                consumer.commit_sync(10)
        seen = [value for deliveries in handled.values() for value, _ in deliveries]
        assert Counter(seen) == Counter([*values, "once-more"])  # each once, the released twice
        assert all(handled.values()), {name: len(d) for name, d in handled.items()}
        assert available(share_server, group, topic) == []
    finally:
        first.close()
        second.close()
