"""Share groups (KIP-932) on the wire against a real `moldau server`: the versions advertised,
share session refusals, acknowledgements of records not held, incremental session answers, and
read_committed share groups that never see aborted transactions (a confluent-kafka
transactional producer writes them)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import iter_batches

from . import rdkafka
from .share_groups import share_topic
from .support import unique_topic
from .wire import Connection

SHARE_APIS = {76, 77, 78, 79}


@pytest.fixture
def wire(server: Any) -> Any:
    with Connection(server.host, server.port) as connection:
        yield connection


def topic_id(wire: Connection, topic: str) -> uuid.UUID:
    metadata = wire.request(
        3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    )
    return metadata.topics[0].topic_id


def share_fetch(
    wire: Connection,
    group: str,
    member: str,
    epoch: int,
    partitions: list[tuple[uuid.UUID, int, list[dict[str, Any]]]] = (),  # type: ignore[assignment]
    *,
    max_wait: int = 200,
) -> Any:
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for topic, index, acks in partitions:
        topics.setdefault(topic, []).append(
            {"partition_index": index, "acknowledgement_batches": acks}
        )
    return wire.request(
        78,
        1,
        {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": epoch,
            "max_wait": max_wait,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": 100,
            "batch_size": 100,
            "topics": [{"topic_id": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [],
        },
    )


def acquired(answer: Any) -> list[tuple[int, int, int]]:
    return [
        (run.first_offset, run.last_offset, run.delivery_count)
        for response in answer.responses
        for partition in response.partitions
        for run in partition.acquired_records
    ]


def produce(server: Any, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    for index in range(count):
        producer.produce(topic, value=f"v{index}".encode())
    assert producer.flush(30) == 0


def test_the_share_apis_are_advertised_at_kafka_4_1s_versions(wire: Connection) -> None:
    answer = wire.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert {key: versions[key] for key in SHARE_APIS} == {key: (1, 1) for key in SHARE_APIS}
    assert not {83, 84, 85, 86, 87, 90, 91, 92} & set(versions)  # (the share coordinator's)
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    assert (finalized["share.version"], supported["share.version"]) == (1, (0, 1))


def test_share_sessions_refuse_what_is_out_of_turn(server: Any, wire: Connection) -> None:
    topic, group = share_topic(server)
    partition = topic_id(wire, topic)
    accept = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
    assert share_fetch(wire, group, "m", 1).error_code == ErrorCode.share_session_not_found
    opened = share_fetch(wire, group, "m", 0, [(partition, 0, accept)])
    assert opened.error_code == ErrorCode.invalid_request  # no acknowledgements when opening
    assert share_fetch(wire, group, "m", 0, [(partition, 0, [])]).error_code == ErrorCode.none
    assert share_fetch(wire, group, "m", 2).error_code == ErrorCode.invalid_share_session_epoch
    assert share_fetch(wire, group, "m", 1).error_code == ErrorCode.none
    acknowledge = {"group_id": group, "member_id": "m", "topics": []}
    refused = wire.request(79, 1, {**acknowledge, "share_session_epoch": 0})
    assert refused.error_code == ErrorCode.invalid_share_session_epoch
    assert wire.request(79, 1, {**acknowledge, "share_session_epoch": 2}).error_code == 0
    assert wire.request(79, 1, {**acknowledge, "share_session_epoch": -1}).error_code == 0
    closed = wire.request(79, 1, {**acknowledge, "share_session_epoch": 3})
    assert closed.error_code == ErrorCode.share_session_not_found


def test_acknowledging_records_not_held_fails_for_that_partition_only(
    server: Any, wire: Connection
) -> None:
    topic, group = share_topic(server)
    partition = topic_id(wire, topic)
    produce(server, topic, 4)
    first = share_fetch(wire, group, "a", 0, [(partition, 0, [])], max_wait=2000)
    assert acquired(first) == [(0, 3, 1)]
    with Connection(server.host, server.port) as other:
        share_fetch(other, group, "b", 0, [(partition, 0, [])])
        stolen = [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]
        answer = share_fetch(other, group, "b", 1, [(partition, 0, stolen)])
        [data] = answer.responses[0].partitions
        assert data.acknowledge_error_code == ErrorCode.invalid_record_state
    mine = [{"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 1, 2, 3]}]
    answer = share_fetch(wire, group, "a", 1, [(partition, 0, mine)])
    [data] = answer.responses[0].partitions
    assert data.acknowledge_error_code == ErrorCode.none
    assert acquired(answer) == [(2, 2, 2)]  # the released one, at once


def test_an_incremental_answer_leaves_out_partitions_with_nothing_to_say(
    server: Any, wire: Connection
) -> None:
    topic, group = unique_topic("queue"), unique_topic("workers")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=2)
    partition = topic_id(wire, topic)
    opened = share_fetch(wire, group, "m", 0, [(partition, 0, []), (partition, 1, [])])
    assert sorted(p.partition_index for p in opened.responses[0].partitions) == [0, 1]
    later = share_fetch(wire, group, "m", 1)
    assert later.error_code == ErrorCode.none and later.responses == ()
    unknown = share_fetch(wire, group, "m", 2, [(uuid.uuid4(), 0, [])])
    [answer] = [p for r in unknown.responses for p in r.partitions]
    assert answer.error_code == ErrorCode.unknown_topic_id


def test_a_read_committed_share_group_never_sees_aborted_records(
    server: Any, wire: Connection
) -> None:
    topic, group = share_topic(server)
    admin = rdkafka.admin_client(server.bootstrap_servers)
    isolation = ConfigEntry(
        "share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET
    )
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[isolation])]
    ).values():
        future.result(timeout=30)
    producer = Producer(
        {"bootstrap.servers": server.bootstrap_servers, "transactional.id": unique_topic("tx")}
    )
    producer.init_transactions(30)
    for outcome in ("abort", "commit", "abort", "commit"):
        producer.begin_transaction()
        for index in range(3):
            producer.produce(topic, value=f"{outcome}-{index}".encode())
        assert producer.flush(30) == 0  # (in the log before the end: an abort purges the rest)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    partition = topic_id(wire, topic)
    # aborted 0-2 and its marker 3; committed 4-6, marker 7; aborted 8-10, marker 11; 12-14
    taken: list[tuple[int, int, int]] = []
    values: list[str] = []
    answer = share_fetch(wire, group, "m", 0, [(partition, 0, [])], max_wait=2000)
    for epoch in range(1, 20):
        taken += acquired(answer)
        values += record_values(answer)
        if taken and taken[-1][1] >= 14:
            break
        answer = share_fetch(wire, group, "m", epoch, max_wait=1000)
    assert taken == [(4, 6, 1), (12, 14, 1)]
    assert values == ["commit-0", "commit-1", "commit-2"] * 2


def record_values(answer: Any) -> list[str]:
    values = []
    for response in answer.responses:
        for partition in response.partitions:
            for batch in iter_batches(partition.records or b""):
                if not batch.header.is_control:
                    values += [record.value.decode() for record in batch.records()]
    return values
