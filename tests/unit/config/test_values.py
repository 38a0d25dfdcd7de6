"""Broker properties: defaults, layering (file < env < overrides), derived values, topic configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.config.values import BrokerConfig, ConfigError, ConfigSource, validate_topic_configs


def test_defaults_start_a_single_node_on_localhost_9092() -> None:
    config = BrokerConfig.load(environ={})
    assert config.get("listeners") == ["PLAINTEXT://127.0.0.1:9092"]
    assert config.log_dirs == ["./moldau-data"]
    assert config.node_id == 1
    assert config.get("log.retention.ms") == 168 * 3_600_000
    assert config.entry("num.partitions").source is ConfigSource.DEFAULT_CONFIG


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
