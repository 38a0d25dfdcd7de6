import uuid

import pytest

from moldau.config.values import BrokerConfig, ConfigSource
from moldau.controller.config_description import describe_configs
from moldau.controller.core import ControllerCore
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    BrokerRegistration,
    ConfigResource,
    IncrementalAlterConfigsResource,
    NewTopic,
)
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


def image_with(static=None, topic_configs=None, broker_configs=()):
    """An image with broker 1, topic "t" and the given dynamic configs, plus its BrokerConfig."""
    config = BrokerConfig(static or {})
    core = ControllerCore(config=config)

    def commit(result):
        records, value = result
        core.replay(records, offset=core.image.offset + len(records))
        return value

    commit(
        core.register_broker(
            BrokerRegistration(broker_id=1, incarnation_id=uuid.uuid4(), endpoints=[])
        )
    )
    commit(core.create_topics([NewTopic(name="t", configs=topic_configs or {})]))
    for resource_name, name, value in broker_configs:
        [result] = commit(
            core.incremental_alter_configs(
                [
                    IncrementalAlterConfigsResource(
                        resource=ConfigResource(resource_type=BROKER, resource_name=resource_name),
                        configs=[AlterableConfig(name=name, op=AlterConfigOp.SET, value=value)],
                    )
                ]
            )
        )
        assert result.error_code == ErrorCode.none
    return core.image, config


def by_name(configs):
    return {c.name: c for c in configs}


def test_topic_configs_report_overrides_and_kafka_defaults():
    image, config = image_with(
        topic_configs={"retention.ms": "123456", "cleanup.policy": "compact"}
    )
    entries = by_name(
        describe_configs(image, config, resource_type=TOPIC, resource_name="t", node_id=1)
    )
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.read_only) == (
        "123456",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
    )
    assert [s.source for s in retention.synonyms] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert (
        retention.synonyms[1].name == "log.retention.ms"
        and retention.synonyms[1].value == "604800000"
    )
    assert (
        entries["compression.type"].value == "producer" and entries["compression.type"].is_default
    )
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["max.message.bytes"].value == "1048588"
    assert entries["cleanup.policy"].value == "compact"
    assert entries["preallocate"].config_type == 1 and entries["segment.bytes"].config_type == 3
    assert entries["cleanup.policy"].config_type == 7


def test_topic_values_fall_through_dynamic_then_static_broker_configs():
    image, config = image_with(
        static={
            "log.retention.ms": "1000",
            "log.segment.bytes": "5000",
            "log.cleanup.policy": "compact",
        },
        broker_configs=[
            ("", "log.retention.ms", "2000"),
            ("1", "log.retention.ms", "3000"),
            ("", "log.segment.bytes", "6000"),
        ],
    )
    entries = by_name(
        describe_configs(image, config, resource_type=TOPIC, resource_name="t", node_id=1)
    )
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("1000", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "6000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "compact",
        ConfigSource.STATIC_BROKER_CONFIG,
    )


def test_broker_configs_show_sources_read_only_and_hide_sensitive_values():
    image, config = image_with(
        static={"log.dirs": "/data/a,/data/b", "ssl.key.password": "secret"},
        broker_configs=[("1", "log.retention.ms", "42")],
    )
    entries = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    assert (entries["log.dirs"].value, entries["log.dirs"].source) == (
        "/data/a,/data/b",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert entries["log.dirs"].read_only and not entries["log.retention.ms"].read_only
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == (
        "1",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "42",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    password = entries["ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert all(s.value is None for s in password.synonyms)
    assert entries["auto.create.topics.enable"].value == "true"
    # Properties without a default of their own are null, as in Kafka, not the derived value.
    assert entries["log.retention.ms"].value == "42"
    assert entries["advertised.listeners"].value is None
    assert entries["log.roll.ms"].value is None
    assert entries["log.roll.ms"].source == ConfigSource.DEFAULT_CONFIG


def test_keys_kafka_does_not_define_are_described_only_once_set():
    """Kafka 4.1 lists its KafkaConfig's keys whether set or not, others only when set."""
    unset_image, unset_config = image_with()
    unset = by_name(
        describe_configs(
            unset_image, unset_config, resource_type=BROKER, resource_name="1", node_id=1
        )
    )
    moldau_only = ("max.partitions", "super.users", "leader.replication.throttled.rate")
    assert not set(moldau_only) & set(unset)
    assert "transaction.two.phase.commit.enable" in unset  # Kafka 4.1's, inert here
    image, config = image_with(
        static={"max.partitions": "100", "super.users": "User:admin"},
        broker_configs=[
            ("1", "leader.replication.throttled.rate", "1000"),
            ("", "replica.alter.log.dirs.io.max.bytes.per.second", "2000"),
        ],
    )
    entries = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    assert [
        (entries[n].value, entries[n].source)
        for n in (*moldau_only, "replica.alter.log.dirs.io.max.bytes.per.second")
    ] == [
        ("100", ConfigSource.STATIC_BROKER_CONFIG),
        ("User:admin", ConfigSource.STATIC_BROKER_CONFIG),
        ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]


def test_broker_id_is_the_node_id():
    image, config = image_with(static={"node.id": "1"})
    entries = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    assert (entries["broker.id"].value, entries["broker.id"].source) == (
        "1",
        ConfigSource.STATIC_BROKER_CONFIG,
    )


def test_topic_values_use_derived_broker_defaults():
    image, config = image_with(static={"log.retention.hours": "2"})
    entries = by_name(
        describe_configs(image, config, resource_type=TOPIC, resource_name="t", node_id=1)
    )
    assert entries["retention.ms"].value == "7200000"


def test_the_cluster_default_resource_lists_only_dynamic_defaults():
    image, config = image_with(broker_configs=[("", "log.retention.ms", "2000")])
    entries = describe_configs(image, config, resource_type=BROKER, resource_name="", node_id=1)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


def test_requested_keys_filter_and_unknown_keys_are_skipped():
    image, config = image_with()
    entries = describe_configs(
        image,
        config,
        resource_type=TOPIC,
        resource_name="t",
        node_id=1,
        keys={"retention.ms", "nope"},
    )
    assert [e.name for e in entries] == ["retention.ms"]


@pytest.mark.parametrize(
    ("resource_type", "resource_name", "code"),
    [
        (TOPIC, "ghost", ErrorCode.unknown_topic_or_partition),
        (TOPIC, "bad name", ErrorCode.invalid_topic_exception),
        (BROKER, "2", ErrorCode.invalid_request),
        (ConfigResourceType.UNKNOWN, "x", ErrorCode.invalid_request),
    ],
)
def test_resources_that_cannot_be_described(resource_type, resource_name, code):
    image, config = image_with()
    with pytest.raises(KafkaError) as raised:
        describe_configs(
            image, config, resource_type=resource_type, resource_name=resource_name, node_id=1
        )
    assert raised.value.code == code


def test_a_static_or_dynamic_value_lists_kafkas_default_under_it() -> None:
    image, config = image_with(
        static={"log.segment.bytes": "5000"}, broker_configs=[("1", "num.partitions", "3")]
    )
    entries = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    assert [(s.value, s.source) for s in entries["log.segment.bytes"].synonyms] == [
        ("5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    assert [(s.value, s.source) for s in entries["num.partitions"].synonyms] == [
        ("3", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("1", ConfigSource.DEFAULT_CONFIG),
    ]
    topic = by_name(
        describe_configs(image, config, resource_type=TOPIC, resource_name="t", node_id=1)
    )
    assert [(s.name, s.source) for s in topic["segment.bytes"].synonyms] == [
        ("log.segment.bytes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG),
    ]


def test_a_cluster_default_the_image_lacks_yet_is_reported_as_the_cluster_default() -> None:
    image, config = image_with()
    config.set_dynamic("log.retention.bytes", "1234", cluster_default=True)
    entries = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    retention = entries["log.retention.bytes"]
    assert (retention.value, retention.source) == (
        "1234",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )


def test_keys_moldau_does_not_act_on_are_described_read_only_with_the_reason() -> None:
    image, config = image_with(static={"num.network.threads": "8"})
    broker = by_name(
        describe_configs(image, config, resource_type=BROKER, resource_name="1", node_id=1)
    )
    threads = broker["num.network.threads"]
    assert (threads.value, threads.source, threads.read_only) == (
        "8",
        ConfigSource.STATIC_BROKER_CONFIG,
        True,
    )
    assert threads.documentation is not None
    assert threads.documentation.startswith("No effect in Moldau: ")
    assert len(broker) >= 300
    topic = by_name(
        describe_configs(image, config, resource_type=TOPIC, resource_name="t", node_id=1)
    )
    assert topic["remote.storage.enable"].read_only and not topic["retention.ms"].read_only
    assert topic["local.retention.ms"].value == "-2"


def test_altering_a_key_moldau_does_not_act_on_is_refused_with_the_reason() -> None:
    core = ControllerCore(config=BrokerConfig({}))
    [result] = core.incremental_alter_configs(
        [
            IncrementalAlterConfigsResource(
                resource=ConfigResource(resource_type=BROKER, resource_name="1"),
                configs=[AlterableConfig(name="num.io.threads", op=AlterConfigOp.SET, value="16")],
            )
        ]
    )[1]
    assert result.error_code == ErrorCode.invalid_config
    assert result.error_message.startswith(
        "Cannot update these configs dynamically: num.io.threads (it has no effect in Moldau: "
    )
