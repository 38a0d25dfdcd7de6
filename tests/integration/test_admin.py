"""confluent-kafka's AdminClient against a real `moldau server`: topics, configs, partitions,
record deletion, cluster description, and Kafka's error codes for bad requests."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from . import rdkafka
from .support import DEADLINE_S, Record, assert_same_records, now_ms, unique_topic, wait_until
from .test_cli_support import moldau


@pytest.fixture(scope="module")
def admin(server):
    return rdkafka.admin_client(server.bootstrap_servers)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=DEADLINE_S)
    return raised.value.args[0]


def create(admin, topic: str, partitions: int = 1, **config: str) -> None:
    [future] = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)],
        operation_timeout=DEADLINE_S,
    ).values()
    future.result(timeout=DEADLINE_S)


def describe(admin, topic: str):
    return admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=DEADLINE_S)


def topic_configs(admin, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=DEADLINE_S)


def listed_topics(admin) -> set[str]:
    return set(admin.list_topics(timeout=DEADLINE_S).topics)


def test_create_describe_and_delete_a_topic(admin):
    topic = unique_topic("admin-lifecycle")
    create(admin, topic, partitions=3)

    description = describe(admin, topic)
    assert description.name == topic
    assert not description.is_internal
    assert [p.id for p in description.partitions] == [0, 1, 2]
    broker_ids = {node.id for p in description.partitions for node in p.replicas}
    assert len(broker_ids) == 1
    for partition in description.partitions:
        assert partition.leader is not None and partition.leader.id in broker_ids
        assert [n.id for n in partition.isr] == [partition.leader.id]
    assert topic in listed_topics(admin)

    admin.delete_topics([topic], operation_timeout=DEADLINE_S)[topic].result(timeout=DEADLINE_S)

    wait_until(lambda: topic not in listed_topics(admin), message=f"{topic} still listed")
    assert error_of(admin.describe_topics(TopicCollection([topic]))[topic]).code() == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )


def test_deleted_topic_name_can_be_created_again_empty(admin, server):
    topic = unique_topic("admin-recreate")
    create(admin, topic)
    rdkafka.produce(
        server.bootstrap_servers, topic, [Record(key=b"k", value=b"old", timestamp_ms=now_ms())]
    )
    admin.delete_topics([topic], operation_timeout=DEADLINE_S)[topic].result(timeout=DEADLINE_S)
    wait_until(lambda: topic not in listed_topics(admin), message=f"{topic} still listed")

    create(admin, topic, partitions=2)

    consumer = rdkafka.consumer(server.bootstrap_servers)
    try:
        for partition in (0, 1):
            assert consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=DEADLINE_S
            ) == (0, 0)
    finally:
        consumer.close()


def test_validate_only_creates_nothing(admin):
    topic = unique_topic("admin-validate")
    [future] = admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)],
        validate_only=True,
        operation_timeout=DEADLINE_S,
    ).values()
    future.result(timeout=DEADLINE_S)
    assert topic not in listed_topics(admin)


def test_existing_topic_is_rejected_with_topic_already_exists(admin):
    topic = unique_topic("admin-twice")
    create(admin, topic)
    [future] = admin.create_topics([NewTopic(topic, 1, 1)]).values()
    assert error_of(future).code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("name", ["bad/name", "with space", ".", "..", "x" * 250, "ünïcode"])
def test_invalid_topic_name_is_rejected_with_invalid_topic_exception(admin, name):
    [future] = admin.create_topics([NewTopic(name, 1, 1)]).values()
    assert error_of(future).code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)


@pytest.mark.parametrize(
    "config",
    [
        {"cleanup.policy": "sometimes"},
        {"retention.ms": "not-a-number"},
        {"no.such.config": "1"},
        {"min.insync.replicas": "-3"},
        {"compression.gzip.level": "0"},
        {"compression.zstd.level": "23"},
        {"compression.zstd.level": "10"},  # Kafka's range; above Moldau's (its event loop)
        {"compression.lz4.level": "12"},
    ],
)
def test_bad_config_is_rejected_with_invalid_config(admin, config):
    topic = unique_topic("admin-bad-config")
    [future] = admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values()
    assert error_of(future).code() == KafkaError.INVALID_CONFIG
    assert topic not in listed_topics(admin)


@pytest.mark.parametrize(
    ("codec", "level"), [("lz4", "6"), ("gzip", "1"), ("gzip", "9"), ("zstd", "9"), ("zstd", "-5")]
)
def test_a_topics_compression_level_recompresses_what_clients_read_back(
    admin, server, codec, level
):
    """KIP-390: batches the broker recompresses for a topic's `compression.type` use its
    `compression.<codec>.level` (lz4 other than 9 is LZ4HC); librdkafka reads them back."""
    topic = unique_topic(f"admin-level-{codec}")
    create(admin, topic, **{"compression.type": codec, f"compression.{codec}.level": level})
    entry = topic_configs(admin, topic)[f"compression.{codec}.level"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        level,
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        False,
    )
    now = now_ms()
    records = [
        Record(key=b"k%d" % i, value=b"order %d for customer %d" % (i, i % 7), timestamp_ms=now)
        for i in range(300)
    ]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records)
    read = rdkafka.consume_all(server.bootstrap_servers, topic, sent, partitions=1)
    assert_same_records(sent, read)


def test_bad_partition_and_replication_counts_are_rejected(admin):
    zero = unique_topic("admin-zero")
    [future] = admin.create_topics(
        [NewTopic(zero, num_partitions=0, replication_factor=1)]
    ).values()
    assert error_of(future).code() == KafkaError.INVALID_PARTITIONS
    too_many = unique_topic("admin-rf")
    [future] = admin.create_topics(
        [NewTopic(too_many, num_partitions=1, replication_factor=3)]
    ).values()
    assert error_of(future).code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_describe_configs_reports_values_sources_and_defaults(admin):
    topic = unique_topic("admin-configs")
    create(admin, topic, **{"retention.ms": "123456", "cleanup.policy": "compact"})

    entries = topic_configs(admin, topic)

    assert entries["retention.ms"].value == "123456"
    assert ConfigSource(entries["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "compact"
    # Untouched keys report Kafka's defaults.
    assert entries["compression.type"].value == "producer"
    assert entries["compression.type"].is_default
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["message.timestamp.type"].value == "CreateTime"
    assert entries["max.message.bytes"].value == "1048588"


def test_alter_and_incremental_alter_configs_change_topic_configs(admin):
    topic = unique_topic("admin-alter")
    create(admin, topic, **{"retention.ms": "1000000"})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "2000000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=DEADLINE_S)

    entries = topic_configs(admin, topic)
    assert entries["retention.ms"].value == "2000000"
    assert entries["segment.ms"].value == "3600000"

    removal = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin.incremental_alter_configs([removal])[removal].result(timeout=DEADLINE_S)
    entries = topic_configs(admin, topic)
    assert entries["segment.ms"].value == "604800000" and entries["segment.ms"].is_default
    assert entries["retention.ms"].value == "2000000"

    # The legacy AlterConfigs replaces the whole set of topic overrides.
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"cleanup.policy": "compact"})
    admin.alter_configs([legacy])[legacy].result(timeout=DEADLINE_S)
    entries = topic_configs(admin, topic)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].value == "604800000"  # override removed: the default again

    invalid = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert error_of(admin.incremental_alter_configs([invalid])[invalid]).code() == (
        KafkaError.INVALID_CONFIG
    )


def test_describe_broker_configs(admin, server):
    [node] = admin.describe_cluster().result(timeout=DEADLINE_S).nodes
    resource = ConfigResource(ResourceType.BROKER, str(node.id))

    entries = admin.describe_configs([resource])[resource].result(timeout=DEADLINE_S)

    assert entries["log.dirs"].value == str(server.data_dir)
    assert ConfigSource(entries["log.dirs"].source) == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["num.partitions"].value == "1"
    assert ConfigSource(entries["num.partitions"].source) == ConfigSource.DEFAULT_CONFIG
    assert entries["auto.create.topics.enable"].value == "true"


def test_create_partitions_adds_usable_partitions(admin, server):
    topic = unique_topic("admin-grow")
    create(admin, topic, partitions=2)

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=DEADLINE_S)

    assert [p.id for p in describe(admin, topic).partitions] == [0, 1, 2, 3, 4]
    record = Record(key=b"new", value=b"in partition 4", timestamp_ms=now_ms(), partition=4)
    sent = rdkafka.produce(server.bootstrap_servers, topic, [record])
    assert (sent[0].partition, sent[0].offset) == (4, 0)
    shrink = admin.create_partitions([NewPartitions(topic, 3)])[topic]
    assert error_of(shrink).code() == KafkaError.INVALID_PARTITIONS


def test_delete_records_moves_the_log_start_offset(admin, server):
    topic = unique_topic("admin-delete-records")
    create(admin, topic, partitions=1)
    records = [
        Record(key=None, value=b"record %d" % i, timestamp_ms=now_ms(), partition=0)
        for i in range(10)
    ]
    sent = rdkafka.produce(server.bootstrap_servers, topic, records)

    [future] = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
    assert future.result(timeout=DEADLINE_S).low_watermark == 4

    consumer = rdkafka.consumer(server.bootstrap_servers)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE_S) == (
            4,
            10,
        )
    finally:
        consumer.close()
    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, sent[4:], partitions=1)
    assert_same_records(sent[4:], consumed)
    [beyond] = admin.delete_records([TopicPartition(topic, 0, 11)]).values()
    assert error_of(beyond).code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster_names_this_broker_and_a_cluster_id(admin, server):
    cluster = admin.describe_cluster().result(timeout=DEADLINE_S)

    [node] = cluster.nodes
    assert (node.host, node.port) == ("127.0.0.1", server.port)
    assert cluster.cluster_id
    assert cluster.controller is not None


def _produce_to(server, topic: str) -> tuple[int, str | None]:
    from moldau.protocol.records import NewRecord, build_batch

    from .wire import Connection

    with Connection(server.host, server.port) as connection:
        answer = connection.request(
            0,
            9,
            {
                "acks": -1,
                "timeout": 10_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": 0, "records": build_batch([NewRecord(key=b"k", value=b"x")])}
                        ],
                    }
                ],
            },
        )
    partition = answer.responses[0].partition_responses[0]
    return int(partition.error_code), partition.error_message


INTERNAL_KEY_TYPES = {"__consumer_offsets": 0, "__transaction_state": 1}


def _find_coordinator(server, key_type: int) -> int:
    """FindCoordinator v4 for one key of `key_type` (0 group, 1 transactional id): its error."""
    from .wire import Connection

    with Connection(server.host, server.port) as connection:
        answer = connection.request(10, 4, {"key_type": key_type, "coordinator_keys": ["k"]})
    return int(answer.coordinators[0].error_code)


def _coordinator_found(server, key_type: int) -> None:
    wait_until(
        lambda: _find_coordinator(server, key_type) == 0,
        message=f"no coordinator for key type {key_type}",
    )


def test_internal_topics_are_created_on_first_use(start_server):
    """As Kafka's: not at start, but by the first FindCoordinator for a group (a transactional
    id), answered COORDINATOR_NOT_AVAILABLE until the topic has leaders."""
    server = start_server()
    admin = rdkafka.admin_client(server.bootstrap_servers)
    assert not set(INTERNAL_KEY_TYPES) & listed_topics(admin)
    assert _find_coordinator(server, 0) == KafkaError.COORDINATOR_NOT_AVAILABLE
    _coordinator_found(server, 0)
    assert "__consumer_offsets" in listed_topics(admin)
    assert "__transaction_state" not in listed_topics(admin)
    _coordinator_found(server, 1)
    assert set(INTERNAL_KEY_TYPES) <= listed_topics(admin)


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_internal_topics_cannot_be_deleted_or_written_by_clients(admin, server, internal):
    """Kafka 4 without an authorizer lets any client delete them (and every group's offsets
    with them); Moldau refuses, saying why and which setting an operator who means it sets.
    Produce is refused with Kafka's own code (INVALID_TOPIC_EXCEPTION)."""
    _coordinator_found(server, INTERNAL_KEY_TYPES[internal])
    assert internal in listed_topics(admin)
    error = error_of(admin.delete_topics([internal], operation_timeout=DEADLINE_S)[internal])
    assert error.code() == KafkaError.INVALID_REQUEST  # (librdkafka asks v4: no message)
    refused = moldau("topic", "delete", internal, bootstrap=server.bootstrap_servers, expect=1)
    assert f"Cannot delete internal topic {internal}: it holds " in refused.stderr
    assert "internal.topics.modification.enable=true on the servers" in refused.stderr
    code, message = _produce_to(server, internal)
    assert code == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)
    assert message is not None and f"Cannot append to internal topic {internal}" in message
    assert internal in listed_topics(admin)
    # A group's (a transactional id's) partition is its hash modulo the count: more partitions
    # would move every one of them away from its offsets (its state).
    more = admin.create_partitions([NewPartitions(internal, 60)], operation_timeout=DEADLINE_S)
    error = error_of(more[internal])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert f"Cannot add partitions to internal topic {internal}" in error.str()
    deleted = admin.delete_records([TopicPartition(internal, 0, 0)], operation_timeout=DEADLINE_S)
    assert error_of(deleted[TopicPartition(internal, 0, 0)]).code() == KafkaError.TOPIC_EXCEPTION


def test_an_operator_may_allow_changing_the_internal_topics(start_server):
    server = start_server(internal_topics_modification_enable="true")
    admin = rdkafka.admin_client(server.bootstrap_servers)
    _coordinator_found(server, 1)
    assert _produce_to(server, "__transaction_state")[0] == 0
    admin.delete_topics(["__transaction_state"], operation_timeout=DEADLINE_S)[
        "__transaction_state"
    ].result(timeout=DEADLINE_S)
    wait_until(
        lambda: "__transaction_state" not in listed_topics(admin),
        message="__transaction_state still listed",
    )
