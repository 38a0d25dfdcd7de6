"""Broker properties: defaults, layering (file < env < overrides), derived values, topic configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.config.definitions import BROKER_KEYS, TOPIC_KEYS
from moldau.config.values import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    parse_value,
    validate_topic_configs,
)


def test_defaults_start_a_single_node_on_localhost_9092() -> None:
    config = BrokerConfig.load(environ={})
    assert config.get("listeners") == ["PLAINTEXT://127.0.0.1:9092"]
    assert config.log_dirs == ["./moldau-data"]
    assert config.node_id == 1
    assert config.get("log.retention.ms") == 168 * 3_600_000
    assert config.entry("num.partitions").source is ConfigSource.DEFAULT_CONFIG


def test_broker_id_and_node_id_report_the_same_number_from_the_layer_that_set_either() -> None:
    entry = BrokerConfig({"node.id": "7"}).entry("broker.id")
    assert (entry.value, entry.source) == (7, ConfigSource.STATIC_BROKER_CONFIG)
    entry = BrokerConfig({"broker.id": "4"}).entry("node.id")
    assert (entry.value, entry.source) == (4, ConfigSource.STATIC_BROKER_CONFIG)
    entry = BrokerConfig({}).entry("broker.id")  # neither: Moldau's default node id
    assert (entry.value, entry.source) == (1, ConfigSource.DEFAULT_CONFIG)


def test_file_then_environment_then_overrides(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# comment\nnum.partitions=3\nlog.dirs=/from-file\nlog.retention.hours: 2\n"
    )
    config = BrokerConfig.load(
        properties_file=str(properties),
        environ={"MOLDAU_LOG_DIRS": "/from-env", "MOLDAU_NUM_PARTITIONS": "4"},
        overrides=["num.partitions=5"],
    )
    assert config.get("num.partitions") == 5
    assert config.log_dirs == ["/from-env"]
    assert config.get("log.retention.ms") == 2 * 3_600_000
    assert config.entry("num.partitions").source is ConfigSource.STATIC_BROKER_CONFIG


def test_log_dir_is_an_alias_when_log_dirs_is_unset() -> None:
    assert BrokerConfig.load(environ={}, overrides=["log.dir=/data"]).log_dirs == ["/data"]


@pytest.mark.parametrize(
    "override", ["num.partitions=zero", "auto.create.topics.enable=maybe", "num.partitions=0"]
)
def test_invalid_values_name_the_property(override: str) -> None:
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        BrokerConfig.load(environ={}, overrides=[override])


def test_topic_config_layers_topic_over_broker_over_default() -> None:
    config = BrokerConfig.load(environ={}, overrides=["log.retention.ms=1000"])
    entry = config.topic_entry("retention.ms", {})
    assert (entry.value, entry.source) == (1000, ConfigSource.STATIC_BROKER_CONFIG)
    own = config.topic_entry("retention.ms", {"retention.ms": 5})
    assert (own.value, own.source) == (5, ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert config.topic_config({})["cleanup.policy"] == ["delete"]


def test_topic_configs_from_clients_are_validated() -> None:
    assert validate_topic_configs({"cleanup.policy": "compact,delete"}) == {
        "cleanup.policy": ["compact", "delete"]
    }
    with pytest.raises(ConfigError):
        validate_topic_configs({"no.such.config": "1"})
    with pytest.raises(ConfigError):
        validate_topic_configs({"cleanup.policy": "shred"})


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "retention.ms",
            "abc",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "segment.bytes",
            "1.5",
            "Invalid value 1.5 for configuration segment.bytes: Not a number of type INT",
        ),
        (
            "segment.bytes",
            "2147483648",
            "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT",
        ),
        (
            "preallocate",
            "yes",
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            "min.cleanable.dirty.ratio",
            "half",
            "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE",
        ),
        (
            "min.insync.replicas",
            "0",
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            "cleanup.policy",
            "delete,shred",
            "Invalid value shred for configuration cleanup.policy: String must be one of: delete, compact",
        ),
        (
            "message.timestamp.type",
            "Now",
            "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
        (
            "compression.lz4.level",
            "18",
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more than "
            "9 (Moldau compresses on its event loop; higher levels cost 2-100 times as much per "
            "byte and would hold other requests back)",
        ),
        (
            "compression.gzip.level",
            "0",
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 "
            "and 9 or equal to -1",
        ),
    ],
)
def test_invalid_values_get_kafkas_message(name: str, raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_value(TOPIC_KEYS[name], raw)
    assert str(caught.value) == message


def test_short_keys_hold_sixteen_bits() -> None:
    key = BROKER_KEYS["sasl.login.refresh.buffer.seconds"]
    assert parse_value(key, "32767") == 32767
    with pytest.raises(ConfigError, match="Not a number of type SHORT"):
        parse_value(key, "32768")


def test_topic_keys_moldau_does_not_act_on_take_only_kafkas_default() -> None:
    assert validate_topic_configs({"remote.storage.enable": "false"}) == {
        "remote.storage.enable": False
    }
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs({"remote.storage.enable": "true"})
    assert str(caught.value).startswith(
        "Invalid value true for configuration remote.storage.enable: it has no effect in Moldau"
    )
    assert "tiered storage" in str(caught.value) and str(caught.value).endswith("be false")


def test_log_roll_jitter_ms_defaults_to_log_roll_jitter_hours() -> None:
    config = BrokerConfig.load(environ={}, overrides=["log.roll.jitter.hours=2"])
    assert config.get("log.roll.jitter.ms") == 7_200_000
    assert config.topic_config({})["segment.jitter.ms"] == 7_200_000
    assert BrokerConfig.load(environ={}).topic_config({})["segment.jitter.ms"] == 0


def test_dynamic_configs_report_whether_they_are_the_nodes_or_the_clusters() -> None:
    config = BrokerConfig.load(environ={}, overrides=["log.retention.ms=1000"])
    config.set_dynamic("log.retention.ms", "2000", cluster_default=True)
    entry = config.entry("log.retention.ms")
    assert (entry.value, entry.source) == (2000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    config.set_dynamic("log.retention.ms", "3000")
    entry = config.entry("log.retention.ms")
    assert (entry.value, entry.source) == (3000, ConfigSource.DYNAMIC_BROKER_CONFIG)
    config.set_dynamic("log.retention.ms", None)
    config.set_dynamic("log.retention.ms", None, cluster_default=True)
    entry = config.entry("log.retention.ms")
    assert (entry.value, entry.source) == (1000, ConfigSource.STATIC_BROKER_CONFIG)
