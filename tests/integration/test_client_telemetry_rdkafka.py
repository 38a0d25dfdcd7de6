"""librdkafka (≥ 2.5, `enable.metrics.push=true` by default) pushes client metrics only to a broker
that lists GetTelemetrySubscriptions in ApiVersions (KIP-714). Moldau, like Kafka without a
telemetry plugin, does not list it: producer and consumer run without a telemetry request, a
telemetry error or a reconnect, which the clients' own `telemetry` debug log shows."""

from __future__ import annotations

import logging
import re
import time

from confluent_kafka import Consumer, Producer, libversion

from .rdkafka import create_topic

TOPIC = "telemetry-quiet"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logger(name: str) -> tuple[logging.Logger, _Lines]:
    handler = _Lines()
    logger = logging.getLogger(f"rdkafka-telemetry-{name}")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger, handler


def test_producer_and_consumer_make_no_telemetry_request(server) -> None:
    assert tuple(int(p) for p in libversion()[0].split(".")[:2]) >= (2, 5)
    bootstrap = f"{server.host}:{server.port}"
    create_topic(bootstrap, TOPIC, partitions=1)
    producer_log, producer_lines = _logger("producer")
    consumer_log, consumer_lines = _logger("consumer")
    debug = {"debug": "telemetry,broker,protocol"}
    producer = Producer({"bootstrap.servers": bootstrap, "logger": producer_log, **debug})
    for index in range(10):
        producer.produce(TOPIC, b"value-%d" % index)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "telemetry-quiet",
            "auto.offset.reset": "earliest",
            "logger": consumer_log,
            **debug,
        }
    )
    consumer.subscribe([TOPIC])
    received = 0
    deadline = time.monotonic() + 30
    while received < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received += 1
        producer.poll(0)
    consumer.close()
    producer.flush(5)
    assert received == 10
    for lines in (producer_lines.lines, consumer_lines.lines):
        assert any("ApiVersion" in line for line in lines), lines[:20]
        requests = [line for line in lines if re.search(r"GetTelemetry|PushTelemetry", line)]
        assert requests == [], requests
        failures = [
            line
            for line in lines
            if re.search(r"Disconnected|Connection refused|[Tt]elemetry.*(error|fail)", line)
        ]
        assert failures == [], failures
