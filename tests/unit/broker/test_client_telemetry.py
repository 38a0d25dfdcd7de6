"""KIP-714 answers of a broker without a telemetry plugin (Kafka's ClientMetricsManager)."""

from __future__ import annotations

import uuid

import pytest

from moldau.broker.client_telemetry import (
    DEFAULT_PUSH_INTERVAL_MS,
    INSTANCE_EXPIRY_MS,
    TELEMETRY_MAX_BYTES,
    ClientTelemetry,
)
from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError

ZERO = uuid.UUID(int=0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def telemetry(clock: ManualClock) -> ClientTelemetry:
    return ClientTelemetry(clock)


def _code(call) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()
    return raised.value.code


def test_a_first_request_gets_a_new_instance_id_and_the_empty_default_subscription(
    telemetry: ClientTelemetry,
) -> None:
    subscription = telemetry.get_subscriptions(ZERO)
    assert subscription.client_instance_id not in (ZERO, uuid.UUID(int=1))
    assert subscription.accepted_compression_types == (4, 3, 1, 2)
    assert subscription.push_interval_ms == DEFAULT_PUSH_INTERVAL_MS == 300_000
    assert subscription.telemetry_max_bytes == TELEMETRY_MAX_BYTES == 1_048_576
    assert subscription.delta_temporality is True
    assert subscription.requested_metrics == ()
    assert telemetry.get_subscriptions(ZERO).client_instance_id != subscription.client_instance_id


def test_a_known_instance_id_is_kept(telemetry: ClientTelemetry) -> None:
    mine = uuid.uuid4()
    assert telemetry.get_subscriptions(mine).client_instance_id == mine


def test_asking_again_within_the_push_interval_is_throttled(
    telemetry: ClientTelemetry, clock: ManualClock
) -> None:
    first = telemetry.get_subscriptions(ZERO)
    again = first.client_instance_id
    code = _code(lambda: telemetry.get_subscriptions(again))
    assert code == ErrorCode.throttling_quota_exceeded
    clock.advance(DEFAULT_PUSH_INTERVAL_MS)
    assert telemetry.get_subscriptions(again).subscription_id == first.subscription_id


def test_a_push_right_after_the_subscription_is_accepted_then_throttled(
    telemetry: ClientTelemetry, clock: ManualClock
) -> None:
    subscription = telemetry.get_subscriptions(ZERO)

    def push(**overrides):
        arguments = {
            "subscription_id": subscription.subscription_id,
            "terminating": False,
            "compression_type": 4,
            "metrics": b"otlp",
        } | overrides
        telemetry.push(subscription.client_instance_id, **arguments)

    push()
    assert _code(push) == ErrorCode.throttling_quota_exceeded
    clock.advance(DEFAULT_PUSH_INTERVAL_MS)
    push()
    push(terminating=True)  # a terminating push is accepted inside the interval
    assert _code(push) == ErrorCode.invalid_request  # nothing after it


def test_push_errors_in_kafkas_order(telemetry: ClientTelemetry, clock: ManualClock) -> None:
    subscription = telemetry.get_subscriptions(ZERO)
    instance = subscription.client_instance_id

    def push(**overrides) -> ErrorCode:
        arguments = {
            "subscription_id": subscription.subscription_id,
            "terminating": False,
            "compression_type": 0,
            "metrics": b"",
        } | overrides
        clock.advance(1)
        return _code(lambda: telemetry.push(instance, **arguments))

    assert push(subscription_id=subscription.subscription_id + 1) == (
        ErrorCode.unknown_subscription_id
    )
    # After UNKNOWN_SUBSCRIPTION_ID the client may ask again at once.
    clock.advance(1)
    assert telemetry.get_subscriptions(instance).subscription_id == subscription.subscription_id
    assert push(compression_type=9) == ErrorCode.unsupported_compression_type
    clock.advance(1)
    telemetry.get_subscriptions(instance)
    assert push(metrics=b"x" * (TELEMETRY_MAX_BYTES + 1)) == ErrorCode.telemetry_too_large


@pytest.mark.parametrize("reserved", [None, ZERO, uuid.UUID(int=1)])
def test_a_push_with_a_reserved_instance_id_is_an_invalid_request(
    telemetry: ClientTelemetry, reserved: uuid.UUID | None
) -> None:
    code = _code(
        lambda: telemetry.push(
            reserved, subscription_id=0, terminating=False, compression_type=0, metrics=b""
        )
    )
    assert code == ErrorCode.invalid_request


def test_an_idle_instance_is_forgotten(telemetry: ClientTelemetry, clock: ManualClock) -> None:
    instance = telemetry.get_subscriptions(ZERO).client_instance_id
    clock.advance(max(INSTANCE_EXPIRY_MS, 3 * DEFAULT_PUSH_INTERVAL_MS))
    # A forgotten instance starts again: its first push is refused (no subscription was given).
    code = _code(
        lambda: telemetry.push(
            instance, subscription_id=0, terminating=False, compression_type=0, metrics=b""
        )
    )
    assert code in (ErrorCode.unknown_subscription_id, ErrorCode.throttling_quota_exceeded)


def test_matching_subscriptions_give_their_metrics_and_shortest_interval(
    telemetry: ClientTelemetry, clock: ManualClock
) -> None:
    telemetry.set_subscriptions(
        {
            "producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"},
            "rdkafka": {
                "metrics": "org.apache.kafka.consumer.",
                "interval.ms": "1000",
                "match": "client_software_name=librdkafka",
            },
        }
    )
    java = telemetry.get_subscriptions(ZERO, {"client_software_name": "apache-kafka-java"})
    assert java.requested_metrics == ("org.apache.kafka.producer.",)
    assert java.push_interval_ms == 60_000
    rdkafka = telemetry.get_subscriptions(ZERO, {"client_software_name": "librdkafka"})
    assert rdkafka.requested_metrics == (
        "org.apache.kafka.consumer.",
        "org.apache.kafka.producer.",
    )
    assert rdkafka.push_interval_ms == 1000
    # The instance id is a selector too; `*` anywhere asks for every metric.
    telemetry.set_subscriptions(
        {"one": {"metrics": "*,x.", "match": f"client_instance_id={java.client_instance_id}"}}
    )
    clock.advance(60_000)
    again = telemetry.get_subscriptions(java.client_instance_id)
    assert again.requested_metrics == ("*",)
    assert again.push_interval_ms == DEFAULT_PUSH_INTERVAL_MS


def test_a_changed_subscription_makes_the_old_subscription_id_unknown(
    telemetry: ClientTelemetry,
) -> None:
    first = telemetry.get_subscriptions(ZERO, {"client_id": "app"})
    telemetry.set_subscriptions({"apps": {"metrics": "a.", "match": "client_id=app"}})

    def push():
        telemetry.push(
            first.client_instance_id,
            subscription_id=first.subscription_id,
            terminating=False,
            compression_type=4,
            metrics=b"otlp",
        )

    assert _code(push) == ErrorCode.unknown_subscription_id
    # Straight after that error, asking again is not throttled, and gives the new subscription.
    second = telemetry.get_subscriptions(first.client_instance_id)
    assert second.subscription_id != first.subscription_id
    assert second.requested_metrics == ("a.",)
    # A subscription the controller would refuse (a key of a newer version) is left out.
    telemetry.set_subscriptions({"future": {"metrics": "b.", "colour": "red"}})
    assert telemetry.get_subscriptions(ZERO).requested_metrics == ()
