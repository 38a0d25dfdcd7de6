"""Moldau's consumer with `group.protocol=consumer` (KIP-848) against a real server: in one group
with librdkafka's KIP-848 consumer, the coordinator splits the partitions between them, each
record is read once, and when Moldau's consumer leaves, librdkafka's takes its partitions.
`moldau consume -X group.protocol=consumer` reads and commits as such a member."""

from __future__ import annotations

import time
from typing import Any

import pytest

from moldau.client import SyncConsumer, SyncProducer
from moldau.client.errors import ConfigException

from . import rdkafka
from .conftest import MoldauServer, ServerFactory
from .support import DEADLINE_S, unique_topic, wait_until
from .test_cli_support import moldau

PARTITIONS = 4


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> MoldauServer:
    """Members heartbeat every 0.5 s (Kafka's 5 s): a partition moves in a few heartbeats."""
    return module_server_factory(group_consumer_heartbeat_interval_ms="500")


def _produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    values = [b"r%03d" % index for index in range(count)]
    with SyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for index, value in enumerate(values):
            producer.produce(topic, value=value, partition=index % PARTITIONS)
        assert producer.flush(DEADLINE_S) == 0
    return values


def _moldau_consumer(bootstrap: str, group: str) -> Any:
    return SyncConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def test_moldau_and_librdkafka_consumers_share_a_kip_848_group(server: MoldauServer) -> None:
    bootstrap = server.bootstrap_servers
    topic, group = unique_topic("kip848-client"), unique_topic("kip848-group")
    moldau("topic", "create", topic, "-p", str(PARTITIONS), bootstrap=bootstrap)
    values = _produce(bootstrap, topic, 80)

    ours = _moldau_consumer(bootstrap, group)
    theirs = rdkafka.consumer(
        bootstrap,
        **{"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"},
    )
    read: dict[str, list[bytes]] = {"moldau": [], "librdkafka": []}
    ours_open = True
    try:
        ours.subscribe([topic])
        theirs.subscribe([topic])

        def of(partitions: set[int]) -> set[bytes]:
            return {value for index, value in enumerate(values) if index % PARTITIONS in partitions}

        def split_and_each_read_its_own() -> bool:
            for message in ours.consume(500, 0.2):
                read["moldau"].append(message.value())
            for message in theirs.consume(500, 0.2):
                if message.error() is None:
                    read["librdkafka"].append(message.value())
            mine = {tp.partition for tp in ours.assignment()}
            other = {tp.partition for tp in theirs.assignment()}
            split = len(mine) == len(other) == 2 and not mine & other
            return (
                split and of(mine) <= set(read["moldau"]) and of(other) <= set(read["librdkafka"])
            )

        # (Before the split one member may read a partition the other then takes: nothing is
        # committed, so the other reads it again from the start.)
        wait_until(
            split_and_each_read_its_own,
            timeout=60,
            message=f"the group never split with each member reading its partitions: {read}",
        )
        mine = ours.assignment()
        ours.commit()  # (what it consumed: each of its partitions to its end, 20 records each)
        assert ours.committed(mine) == dict.fromkeys(mine, 20)

        ours.close()  # leaves the group (member epoch -1): librdkafka's member takes all
        ours_open = False
        wait_until(
            lambda: theirs.poll(0.2) is None and len(theirs.assignment()) == PARTITIONS,
            timeout=60,
            message="librdkafka's member never took the partitions the leaving member gave up",
        )
    finally:
        theirs.close()
        if ours_open:
            ours.close()


def test_the_cli_consumes_and_commits_as_a_kip_848_member(server: MoldauServer) -> None:
    bootstrap = server.bootstrap_servers
    topic, group = unique_topic("kip848-cli"), unique_topic("kip848-cli-group")
    moldau("topic", "create", topic, "-p", str(PARTITIONS), bootstrap=bootstrap)
    values = _produce(bootstrap, topic, 12)
    started = time.monotonic()
    output = moldau("consume", topic, "-g", group, "-X", "group.protocol=consumer", "-e",
                    "-f", "%s\n", bootstrap=bootstrap).text  # fmt: skip
    assert sorted(output.split()) == sorted(value.decode() for value in values)
    described = moldau("group", "describe", group, "--format", "json", bootstrap=bootstrap).json()
    assert {row["partition"]: row["current_offset"] for row in described["partitions"]} == {
        p: 3 for p in range(PARTITIONS)
    }
    assert time.monotonic() - started < DEADLINE_S


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group.protocol": "cooperative"}, "group.protocol must be classic or consumer"),
        ({"group.protocol": "consumer", "session.timeout.ms": 10_000}, "session.timeout.ms is not"),
        ({"group.remote.assignor": "range"}, "needs group.protocol=consumer"),
    ],
)
def test_group_protocol_mistakes_are_one_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        SyncConsumer({"group.id": "g", **settings})
