"""Option parsing of `format("moldau")`: Spark's Kafka names, defaults and refusals."""

from __future__ import annotations

import pytest

from moldau.spark.offsets import EARLIEST, LATEST
from moldau.spark.options import SinkOptions, SourceOptions, client_settings
from moldau.types import TopicPartition

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = False, **options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOTSTRAP, **options}, streaming=streaming)


def test_defaults_match_sparks_kafka_source() -> None:
    batch = parse(subscribe="a,b")
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.default == EARLIEST
    assert batch.ending is not None and batch.ending.default == LATEST
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.read_committed
    stream = parse(streaming=True, subscribe="a")
    assert stream.starting.default == LATEST and stream.ending is None


def test_option_names_are_case_insensitive_and_bootstrap_has_two_spellings() -> None:
    options = SourceOptions.parse(
        {"bootstrap.servers": "h:1", "SUBSCRIBE": "t", "includeheaders": "TRUE"}, streaming=False
    )
    assert options.client["bootstrap.servers"] == "h:1"
    assert options.include_headers


def test_assign_and_offsets_json() -> None:
    options = parse(
        assign='{"t":[1,0]}',
        startingOffsets='{"t":{"0":5,"1":-2}}',
        endingOffsets='{"t":{"0":-1,"1":9}}',
    )
    assert options.subscription.assign == {"t": (0, 1)}
    assert options.starting.absolute(TopicPartition("t", 0)) == 5
    assert options.starting.request_for(TopicPartition("t", 1)) == EARLIEST
    assert options.ending is not None
    assert options.ending.request_for(TopicPartition("t", 0)) == LATEST


def test_timestamps_take_precedence_over_offsets() -> None:
    options = parse(subscribe="t", startingOffsets="earliest", startingTimestamp="1000")
    assert options.starting.request_for(TopicPartition("t", 3)) == 1000
    options = parse(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":7}}')
    assert options.starting.request_for(TopicPartition("t", 0)) == 7


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of"),
        ({}, "exactly one of"),
        ({"assign": "[0]"}, "option 'assign'"),
        ({"subscribePattern": "("}, "not a valid regex"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "may not be 'latest'"),
        ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "may not be 'earliest'"),
        ({"subscribe": "t", "startingOffsets": "{oops"}, "option 'startingOffsets'"),
        ({"subscribe": "t", "minPartitions": "0"}, "positive integer"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({"subscribe": "t", "kafka.auto.offset.reset": "latest"}, "startingOffsets"),
        ({"subscribe": "t", "kafka.key.deserializer": "x"}, "key.deserializer"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "5"}, "streaming queries only"),
        ({"subscribe": "t", "commitOffsetsToGroup": "true"}, "kafka.group.id"),
    ],
)
def test_invalid_batch_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(**options)


def test_streaming_limits_and_delay() -> None:
    options = parse(
        streaming=True,
        subscribe="t",
        maxOffsetsPerTrigger="100",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="30s",
    )
    assert (options.max_offsets_per_trigger, options.min_offsets_per_trigger) == (100, 10)
    assert options.max_trigger_delay_ms == 30_000
    with pytest.raises(ValueError, match="larger than"):
        parse(streaming=True, subscribe="t", maxOffsetsPerTrigger="1", minOffsetsPerTrigger="2")
    with pytest.raises(ValueError, match="batch queries only"):
        parse(streaming=True, subscribe="t", endingOffsets="latest")


def test_kafka_prefixed_settings_reach_the_client() -> None:
    settings = client_settings(
        {
            **BOOTSTRAP,
            "kafka.isolation.level": "read_uncommitted",
            "kafka.max.poll.records": "10",  # Java-only: dropped
            "kafka.group.id": "g",  # decided by the connector
        }
    )
    assert settings == {
        "bootstrap.servers": "127.0.0.1:9092",
        "isolation.level": "read_uncommitted",
    }
    assert not parse(subscribe="t", **{"kafka.isolation.level": "read_uncommitted"}).read_committed


def test_group_commit_option() -> None:
    assert parse(subscribe="t", **{"kafka.group.id": "g"}).commit_group == "g"
    off = parse(subscribe="t", commitOffsetsToGroup="false", **{"kafka.group.id": "g"})
    assert off.commit_group is None


def test_sink_options() -> None:
    options = SinkOptions.parse({**BOOTSTRAP, "topic": "out"})
    assert options.topic == "out" and not options.exactly_once
    assert SinkOptions.parse({**BOOTSTRAP, "exactlyOnce": "true"}, streaming=True).exactly_once
    with pytest.raises(ValueError, match=r"value\.serializer"):
        SinkOptions.parse({**BOOTSTRAP, "kafka.value.serializer": "x"})
    with pytest.raises(ValueError, match=r"kafka\.bootstrap\.servers"):
        SinkOptions.parse({"topic": "out"})
