"""Client settings: librdkafka names, aliases, and errors that name the setting."""

from __future__ import annotations

import re

import pytest

from moldau.client.config import ClientConfig, parse_bootstrap_servers
from moldau.client.errors import ConfigException


def test_bootstrap_servers_accept_lists_and_listener_urls() -> None:
    assert parse_bootstrap_servers("a:1, PLAINTEXT://b:2,c") == [("a", 1), ("b", 2), ("c", 9092)]


def test_bad_port_is_reported_with_an_example() -> None:
    with pytest.raises(ConfigException, match="host:port"):
        parse_bootstrap_servers("a:notaport")


def test_unknown_setting_suggests_the_close_name() -> None:
    with pytest.raises(ConfigException, match=re.escape("did you mean 'linger.ms'")):
        ClientConfig({"linger": 5})


def test_aliases_map_to_kafka_names() -> None:
    config = ClientConfig({"queue.buffering.max.ms": "7", "compression.codec": "gzip"})
    assert config.get_int("linger.ms") == 7
    assert config.get_str("compression.type") == "gzip"


def test_malformed_values_name_the_setting() -> None:
    config = ClientConfig({"linger.ms": "soon", "enable.auto.commit": "maybe"})
    with pytest.raises(ConfigException, match=re.escape("'linger.ms' must be an integer")):
        config.get_int("linger.ms")
    with pytest.raises(
        ConfigException, match=re.escape("'enable.auto.commit' must be true or false")
    ):
        config.get_bool("enable.auto.commit")
