"""The key table: every key Kafka 4.0 has is known, and those Moldau does not act on say why."""

from __future__ import annotations

import pytest

from moldau.config.definitions import BROKER_KEYS, TOPIC_KEYS, TOPIC_SYNONYMS
from moldau.config.kafka_only import KAFKA_ONLY_BROKER_KEYS, KAFKA_ONLY_TOPIC_KEYS
from moldau.config.keys import NOT_APPLICABLE_PREFIX, ConfigType
from moldau.config.values import parse_value

# A few of Kafka's keys from each area, whether Moldau acts on them or not.
WELL_KNOWN_BROKER_KEYS = [
    "node.id",
    "process.roles",
    "log.dirs",
    "num.network.threads",
    "num.io.threads",
    "sasl.kerberos.min.time.before.relogin",
    "ssl.keymanager.algorithm",
    "group.consumer.assignors",
    "group.share.record.lock.duration.ms",
    "remote.log.storage.system.enable",
    "delegation.token.secret.key",
    "metric.reporters",
    "transaction.partition.verification.enable",
    "controller.quorum.append.linger.ms",
]


def test_the_broker_knows_at_least_as_many_keys_as_kafka_lists() -> None:
    assert len(BROKER_KEYS) >= 300


@pytest.mark.parametrize("name", WELL_KNOWN_BROKER_KEYS)
def test_well_known_kafka_broker_keys_are_known(name: str) -> None:
    assert name in BROKER_KEYS


@pytest.mark.parametrize(
    "name", ["local.retention.ms", "remote.storage.enable", "compression.zstd.level"]
)
def test_kafka_topic_keys_are_known(name: str) -> None:
    assert name in TOPIC_KEYS


def test_keys_moldau_does_not_act_on_are_read_only_and_say_why() -> None:
    inert = [key for key in [*BROKER_KEYS.values(), *TOPIC_KEYS.values()] if not key.applies]
    assert {key.name for key in KAFKA_ONLY_BROKER_KEYS} <= {key.name for key in inert}
    for key in inert:
        assert key.read_only, key.name
        assert key.doc.startswith(NOT_APPLICABLE_PREFIX) and len(key.doc) > 40, key.name
    assert not BROKER_KEYS["num.network.threads"].applies
    assert BROKER_KEYS["log.retention.ms"].applies


def test_every_default_is_a_valid_value_of_its_key() -> None:
    for key in [*BROKER_KEYS.values(), *TOPIC_KEYS.values()]:
        parse_value(key, key.default)  # raises ConfigError if Kafka's default were refused


def test_kafka_types_and_defaults_are_kept() -> None:
    assert (BROKER_KEYS["sasl.login.refresh.buffer.seconds"].type, 300) == (
        ConfigType.SHORT,
        BROKER_KEYS["sasl.login.refresh.buffer.seconds"].default,
    )
    assert BROKER_KEYS["log.cleaner.io.buffer.load.factor"].default == 0.9
    assert BROKER_KEYS["group.consumer.assignors"].type is ConfigType.LIST
    assert BROKER_KEYS["delegation.token.secret.key"].sensitive


def test_topic_synonyms_name_broker_keys_of_the_same_applicability() -> None:
    for topic_name, broker_name in TOPIC_SYNONYMS.items():
        assert TOPIC_KEYS[topic_name].applies == BROKER_KEYS[broker_name].applies, topic_name
    assert {key.name for key in KAFKA_ONLY_TOPIC_KEYS} <= set(TOPIC_KEYS)
