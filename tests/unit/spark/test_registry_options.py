"""Options for keys and values in the schema registry's wire format: defaults (TopicNameStrategy,
the latest version, FAILFAST) and refusals that say what to set."""

from __future__ import annotations

import pytest

from moldau.spark.options import SinkOptions, SourceOptions, source_registry_options
from moldau.spark.registry_options import RecordFormat

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
REGISTRY = {"schema.registry.url": "http://127.0.0.1:8081"}


def test_without_a_format_keys_and_values_stay_bytes() -> None:
    assert SourceOptions.parse({**BOOTSTRAP, "subscribe": "t"}, streaming=False).registry is None
    assert SinkOptions.parse({**BOOTSTRAP, "topic": "t"}).registry is None


def test_one_topic_names_the_subjects_and_the_latest_version_reads() -> None:
    options = SourceOptions.parse(
        {
            **BOOTSTRAP,
            **REGISTRY,
            "subscribe": "orders",
            "value.format": "AVRO",
            "key.format": "json",
            "Mode": "permissive",
        },
        streaming=True,
    )
    registry = options.registry
    assert registry is not None and registry.permissive
    assert registry.connection.url == "http://127.0.0.1:8081"
    key, value = registry.columns
    assert (key.column, key.format, key.subject) == ("key", RecordFormat.JSON, "orders-key")
    assert (value.format, value.subject, value.version) == (
        RecordFormat.AVRO,
        "orders-value",
        "latest",
    )
    assert source_registry_options({**REGISTRY, "assign": '{"a":[0]}', "value.format": "avro"})


def test_the_sink_names_its_subject_and_record() -> None:
    options = SinkOptions.parse(
        {
            **BOOTSTRAP,
            **REGISTRY,
            "topic": "out",
            "value.format": "avro",
            "value.recordName": "Order",
            "value.recordNamespace": "shop",
            "schema.registry.basic.auth.user.info": "alice:secret",
        },
    )
    assert options.registry is not None
    [value] = options.registry.columns
    assert (value.subject, value.record_name, value.record_namespace) == (
        "out-value",
        "Order",
        "shop",
    )
    assert options.registry.connection.user_info == "alice:secret"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a,b", "value.format": "avro"}, "'value.subject' is required"),
        ({"subscribepattern": "a.*", "value.format": "avro"}, "'value.subject' is required"),
        ({"subscribe": "a", "value.format": "protobuf"}, "must be binary, avro or json"),
        ({"subscribe": "a", "value.subject": "s"}, "needs 'value.format'"),
        ({"subscribe": "a", "mode": "DROPMALFORMED", "value.format": "avro"}, "FAILFAST or"),
        ({"subscribe": "a", "value.format": "avro", "value.schema.version": "0"}, "latest or"),
        ({"subscribe": "a", "value.format": "avro", "value.recordName": "R"}, "writing only"),
        ({"subscribe": "a", "schema.registry.urls": "x", "value.format": "avro"}, "not known"),
    ],
)
def test_source_refusals_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions.parse({**BOOTSTRAP, **REGISTRY, **options}, streaming=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"value.format": "avro"}, "needs 'schema.registry.url'"),
        ({**REGISTRY}, "needs 'key.format' or 'value.format'"),
        ({**REGISTRY, "value.format": "avro", "schema.registry.url": "localhost:8081"}, "http"),
        (
            {**REGISTRY, "value.format": "avro", "schema.registry.basic.auth.user.info": "bob"},
            "USER:PASSWORD",
        ),
    ],
)
def test_registry_refusals(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions.parse({**BOOTSTRAP, "subscribe": "t", **options}, streaming=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"value.format": "json"}, "the sink encodes avro only"),
        ({"value.format": "avro", "mode": "PERMISSIVE"}, "applies to reading"),
        ({"value.format": "avro", "value.schema.version": "3"}, "reading only"),
    ],
)
def test_sink_refusals(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SinkOptions.parse({**BOOTSTRAP, **REGISTRY, "topic": "t", **options})
