"""Sink options of exactly-once streaming writes: `exactlyOnce` and `transactionalIdPrefix`."""

from __future__ import annotations

import pytest

from moldau.spark.options import SinkOptions

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def test_exactly_once_streaming_writes_take_a_transactional_id_prefix() -> None:
    options = SinkOptions.parse(
        {**BOOTSTRAP, "exactlyOnce": "true", "transactionalIdPrefix": "orders-copy"},
        streaming=True,
    )
    assert options.exactly_once
    assert options.transactional_id_prefix == "orders-copy"


def test_the_prefix_defaults_to_none_so_the_query_id_is_used() -> None:
    options = SinkOptions.parse({**BOOTSTRAP, "exactlyOnce": "true"}, streaming=True)
    assert options.transactional_id_prefix is None


def test_transaction_timeout_comes_from_the_kafka_option() -> None:
    options = SinkOptions.parse(
        {**BOOTSTRAP, "exactlyOnce": "true", "kafka.transaction.timeout.ms": "90000"},
        streaming=True,
    )
    assert options.transaction_timeout_ms == 90_000


def test_exactly_once_is_refused_for_batch_writes() -> None:
    with pytest.raises(ValueError, match="streaming writes only"):
        SinkOptions.parse({**BOOTSTRAP, "exactlyOnce": "true"})


def test_a_prefix_without_exactly_once_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 'exactlyOnce'"):
        SinkOptions.parse({**BOOTSTRAP, "transactionalIdPrefix": "p"}, streaming=True)
