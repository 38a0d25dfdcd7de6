"""Client-metrics subscriptions (KIP-714 config resources): Kafka's checks and messages, the
controller's records for them, and which clients a subscription matches."""

from __future__ import annotations

import time

import pytest

from moldau.config.values import BrokerConfig, ConfigSource
from moldau.controller import client_metrics
from moldau.controller.config_description import DescribedConfig, describe_configs
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

from .test_controller_core import codes, commit, make_core


def _refusal(configs: dict[str, str], name: str = "sub") -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as raised:
        client_metrics.check_name(name)
        client_metrics.validate(configs)
    return raised.value.code, raised.value.message


@pytest.mark.parametrize(
    ("configs", "name", "code", "message"),
    [
        ({}, "", ErrorCode.invalid_request, "Subscription name can't be empty"),
        (
            {"random": "10"},
            "sub",
            ErrorCode.invalid_request,
            "Unknown client metrics configuration: random",
        ),
        (
            {"interval.ms": "50"},
            "sub",
            ErrorCode.invalid_request,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            {"interval.ms": "soon"},
            "sub",
            ErrorCode.invalid_config,
            "Invalid value soon for configuration interval.ms: Not a number of type INT",
        ),
        ({"match": "10"}, "sub", ErrorCode.invalid_config, "Illegal client matching pattern: 10"),
        (
            {"match": "client_id=a=b"},
            "sub",
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_id=a=b",
        ),
        (
            {"match": "client_colour=red"},
            "sub",
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_colour=red",
        ),
        (
            {"match": "client_id=[unclosed"},
            "sub",
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_id=[unclosed",
        ),
        (  # a backreference: java.util.regex has them, RE2 (Kafka's future syntax) does not
            {"match": "client_id=(a)\\1"},
            "sub",
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_id=(a)\\1",
        ),
    ],
)
def test_configs_a_subscription_cannot_have_are_refused_with_kafkas_words(
    configs: dict[str, str], name: str, code: ErrorCode, message: str
) -> None:
    assert _refusal(configs, name) == (code, message)


def test_a_subscription_matches_whole_values_of_every_selector() -> None:
    subscription = client_metrics.parse_subscription(
        "java",
        {
            "metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
            "interval.ms": "1000",
            "match": "client_software_name=apache-kafka-java, client_software_version=3\\.9\\..*",
        },
    )
    assert subscription.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.consumer."}
    assert subscription.interval_ms == 1000
    java = {"client_software_name": "apache-kafka-java", "client_software_version": "3.9.1"}
    assert subscription.matches(java)
    assert not subscription.matches(java | {"client_software_version": "4.0.0"})
    assert not subscription.matches(java | {"client_software_name": "apache-kafka-javascript"})
    assert not subscription.matches({})
    # No `match`: every client. A trailing `=` is dropped as Java's split drops it.
    everyone = client_metrics.parse_subscription("all", {"metrics": "*"})
    assert everyone.matches({}) and everyone.interval_ms == 300_000
    assert client_metrics.parse_subscription("x", {"match": "client_id=a="}).matches(
        {"client_id": "a"}
    )


def test_matching_a_hostile_client_id_takes_linear_time() -> None:
    """`(a+)+$` backtracks exponentially in a backtracking engine (Python's `re` takes minutes
    on this value); RE2 answers at once."""
    nested = client_metrics.parse_subscription("x", {"match": "client_id=(a+)+$"})
    started = time.perf_counter()
    assert not nested.matches({"client_id": "a" * 100_000 + "!"})
    assert time.perf_counter() - started < 1.0


def _resource(name: str) -> ConfigResource:
    return ConfigResource(resource_type=ConfigResourceType.CLIENT_METRICS, resource_name=name)


def _change(core, name: str, *changes: tuple[str, AlterConfigOp, str | None]) -> list[ErrorCode]:
    return codes(
        commit(
            core,
            core.incremental_alter_configs(
                [
                    IncrementalAlterConfigsResource(
                        resource=_resource(name),
                        configs=[AlterableConfig(name=n, op=op, value=v) for n, op, v in changes],
                    )
                ]
            ),
        )
    )


def test_setting_configs_creates_a_subscription_and_deleting_them_all_removes_it() -> None:
    core = make_core()
    SET, DELETE, APPEND, SUBTRACT = (
        AlterConfigOp.SET,
        AlterConfigOp.DELETE,
        AlterConfigOp.APPEND,
        AlterConfigOp.SUBTRACT,
    )
    assert _change(core, "s", ("metrics", SET, "a."), ("interval.ms", SET, "1000")) == [
        ErrorCode.none
    ]
    assert dict(core.image.client_metrics["s"]) == {"metrics": "a.", "interval.ms": "1000"}
    assert _change(core, "s", ("metrics", APPEND, "b.,a.")) == [ErrorCode.none]
    assert core.image.client_metrics["s"]["metrics"] == "a.,b."
    assert _change(core, "s", ("metrics", SUBTRACT, "a.")) == [ErrorCode.none]
    assert core.image.client_metrics["s"]["metrics"] == "b."
    assert _change(core, "s", ("interval.ms", APPEND, "5")) == [ErrorCode.invalid_config]
    assert _change(core, "s", ("interval.ms", SET, "99")) == [ErrorCode.invalid_request]
    assert _change(core, "", ("metrics", SET, "*")) == [ErrorCode.invalid_request]
    assert _change(core, "s", ("colour", SET, "red")) == [ErrorCode.invalid_request]

    def describe() -> list[DescribedConfig]:
        return describe_configs(
            core.image,
            BrokerConfig({}),
            resource_type=ConfigResourceType.CLIENT_METRICS,
            resource_name="s",
            node_id=1,
        )

    described = describe()
    # Every config, as Kafka 4.1 answers: `match` unset is its default (kafka-client-metrics
    # --describe prints `match=`), with no synonym.
    assert [(c.name, c.value, c.source, c.config_type, c.synonyms) for c in described] == [
        ("interval.ms", "1000", ConfigSource.CLIENT_METRICS_CONFIG, 3, described[0].synonyms),
        ("match", "", ConfigSource.DEFAULT_CONFIG, 7, ()),
        ("metrics", "b.", ConfigSource.CLIENT_METRICS_CONFIG, 7, described[2].synonyms),
    ]
    assert len(described[0].synonyms) == 1
    # ("match" was never set: deleting it too is what kafka-client-metrics --delete sends)
    deleted = (("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None))
    assert _change(core, "s", *deleted) == [ErrorCode.none]
    assert "s" not in core.image.client_metrics
    described = describe()
    assert [(c.name, c.value, c.source) for c in described] == [
        ("interval.ms", "300000", ConfigSource.DEFAULT_CONFIG),
        ("match", "", ConfigSource.DEFAULT_CONFIG),
        ("metrics", "", ConfigSource.DEFAULT_CONFIG),
    ]
