"""Client quotas (`moldau.broker.quotas`): Kafka's precedence of entities, the sensors they
share, the throttle time of a rate above its quota, and what a throttled answer carries."""

from __future__ import annotations

import struct
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from moldau.broker.quotas import (
    MAX_THROTTLE_MS,
    ClientQuotas,
    QuotaUsage,
    precedence,
    throttle_time_ms,
    user_of,
)
from moldau.broker.responses import Response
from moldau.clock import ManualClock
from moldau.protocol.adapter import RequestHeader
from moldau.protocol.api_keys import ApiKey

PRODUCE = "producer_byte_rate"
CONSUME = "consumer_byte_rate"
REQUEST = "request_percentage"

# The eight levels, most specific first, for user alice and client id app.
ALICE_APP = (("client-id", "app"), ("user", "alice"))
ALICE_ANY_CLIENT = (("client-id", None), ("user", "alice"))
ALICE = (("user", "alice"),)
ANY_USER_APP = (("client-id", "app"), ("user", None))
ANY_USER_ANY_CLIENT = (("client-id", None), ("user", None))
ANY_USER = (("user", None),)
APP = (("client-id", "app"),)
ANY_CLIENT = (("client-id", None),)
LEVELS = [
    ALICE_APP,
    ALICE_ANY_CLIENT,
    ALICE,
    ANY_USER_APP,
    ANY_USER_ANY_CLIENT,
    ANY_USER,
    APP,
    ANY_CLIENT,
]


def image_quotas(quotas: dict[Any, dict[str, float]]) -> Any:
    """Quotas as an image holds them (a new mapping on every change)."""
    return MappingProxyType({entity: MappingProxyType(values) for entity, values in quotas.items()})


def manager(
    quotas: dict[Any, dict[str, float]], clock: ManualClock | None = None, samples: int = 11
) -> ClientQuotas:
    client_quotas = ClientQuotas(clock=clock or ManualClock(), samples=samples, window_s=1)
    client_quotas.follow(image_quotas(quotas))
    return client_quotas


def test_the_precedence_is_kafkas_most_specific_first() -> None:
    assert [entity for entity, _tags in precedence("alice", "app")] == LEVELS


def test_each_level_applies_until_a_more_specific_one_is_set() -> None:
    quotas = manager({})
    for level in reversed(range(len(LEVELS))):
        quotas.follow(image_quotas({e: {PRODUCE: 100.0 + i} for i, e in enumerate(LEVELS[level:])}))
        quota = quotas.of_client("User:alice", "app")
        assert quota is not None and quota.producer is not None
        assert quota.producer.entity == LEVELS[level]
        assert quota.producer.bound == 100.0


def test_each_quota_key_is_resolved_on_its_own() -> None:
    source = {ALICE_APP: {CONSUME: 1.0}, ALICE: {PRODUCE: 2.0}, ANY_CLIENT: {REQUEST: 3.0}}
    quota = manager(source).of_client("User:alice", "app")
    assert quota is not None
    assert quota.consumer is not None and quota.consumer.entity == ALICE_APP
    assert quota.producer is not None and quota.producer.entity == ALICE
    assert quota.request is not None and quota.request.entity == ANY_CLIENT


def test_no_quota_that_matches_means_no_quota() -> None:
    source = {(("user", "bob"),): {PRODUCE: 1.0}, (("ip", None),): {"x": 1.0}}
    quotas = manager(source)
    assert quotas.of_client("User:alice", "app") is None
    assert quotas.of_client("User:bob", "app") is not None


def test_quotas_not_enforced_leave_every_client_alone() -> None:
    source = {ANY_USER: {"controller_mutation_rate": 1.0}}
    assert manager(source).of_client("User:alice", "app") is None


def test_the_unauthenticated_user_is_anonymous_and_defaults_apply_to_it() -> None:
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"
    assert user_of("User:CN=client,O=Moldau") == "CN=client,O=Moldau"
    source = {ANY_USER: {PRODUCE: 1.0}, (("user", "ANONYMOUS"),): {CONSUME: 2.0}}
    quota = manager(source).of_client("User:ANONYMOUS", None)
    assert quota is not None and quota.producer is not None and quota.consumer is not None
    assert quota.consumer.entity == (("user", "ANONYMOUS"),)


def test_a_user_quota_is_shared_by_its_clients_and_a_default_one_is_per_user() -> None:
    source = {ALICE: {PRODUCE: 1.0}, ANY_USER: {CONSUME: 1.0}, ANY_CLIENT: {REQUEST: 1.0}}
    quotas = manager(source)
    alice_app = quotas.of_client("User:alice", "app")
    alice_other = quotas.of_client("User:alice", "other")
    bob_app = quotas.of_client("User:bob", "app")
    assert alice_app and alice_other and bob_app
    assert alice_app.producer and alice_other.producer
    assert alice_app.producer.sensor is alice_other.producer.sensor  # user alice
    assert alice_app.consumer and bob_app.consumer
    assert alice_app.consumer.sensor is not bob_app.consumer.sensor  # <default> user: per user
    assert alice_app.request and alice_other.request and bob_app.request
    assert alice_app.request.sensor is bob_app.request.sensor  # client id app, any user
    assert alice_app.request.sensor is not alice_other.request.sensor


def test_the_resolution_is_cached_until_the_images_quotas_change() -> None:
    quotas = manager({})
    assert not quotas.enforced and quotas.of_client("User:alice", "app") is None
    current = image_quotas({APP: {PRODUCE: 1000.0}})
    quotas.follow(current)
    first = quotas.of_client("User:alice", "app")
    assert quotas.enforced and quotas.of_client("User:alice", "app") is first
    quotas.follow(current)  # the next image, its quotas unchanged: the same mapping
    assert quotas.of_client("User:alice", "app") is first
    assert first is not None and first.producer is not None
    first.record(first.producer, 50_000, first.now_ms())
    quotas.follow(image_quotas({APP: {PRODUCE: 2000.0}}))
    second = quotas.of_client("User:alice", "app")
    assert second is not first and second is not None and second.producer is not None
    assert second.producer.bound == 2000.0
    assert second.producer.sensor is first.producer.sensor  # what was used still counts
    quotas.follow(image_quotas({}))
    assert not quotas.enforced and quotas.of_client("User:alice", "app") is None


def test_sensors_idle_for_an_hour_are_dropped() -> None:
    clock = ManualClock()
    source = {ANY_CLIENT: {PRODUCE: 1.0}}
    quotas = manager(source, clock)
    quotas.of_client("User:alice", "one")
    clock.advance(3_600_000)
    quotas.of_client("User:alice", "two")  # a sweep on the way
    assert quotas.sensor_count == 1


def test_throttle_time_is_the_delay_that_brings_the_rate_back_to_the_quota() -> None:
    assert throttle_time_ms(100.0, 50.0, 2000) == 2000
    assert throttle_time_ms(50.0, 50.0, 2000) == 0
    assert throttle_time_ms(40.0, 50.0, 2000) == 0
    assert throttle_time_ms(1.0, 0.0, 2000) == MAX_THROTTLE_MS
    assert throttle_time_ms(1e30, 1.0, 10_000) == MAX_THROTTLE_MS


def test_a_spike_over_the_quota_is_throttled_until_it_has_rolled_over() -> None:
    # Kafka's ClientQuotaManagerTest.testQuotaViolation: a quota of 500 bytes/s.
    clock = ManualClock()
    quota = manager({ANY_CLIENT: {PRODUCE: 500.0}}, clock).of_client("User:x", "c")
    assert quota is not None

    def record(size: int) -> int:
        return quota.record(quota.producer, size, quota.now_ms())

    for _ in range(10):
        assert record(400) == 0
        clock.advance(1000)
    clock.advance(500)
    # 400 * 10 + 2300 = 6300 bytes over 10.5 s = 600/s: (600 - 500) / 500 * 10.5 s.
    assert record(2300) == 2100
    clock.advance(2100)
    for _ in range(10):
        record(400)
        clock.advance(1000)
    assert record(0) == 0


def test_request_time_is_a_percentage_of_a_thread_and_its_throttle_at_most_a_window() -> None:
    clock = ManualClock()
    quota = manager({ANY_CLIENT: {REQUEST: 10.0}}, clock).of_client("User:x", "c")
    assert quota is not None
    # 0.5 s of handler time = 50 %-seconds over the 10 s span: 5 %, within 10 %.
    assert quota.record_request_time(0.5, quota.now_ms()) == 0
    # 5 s in all: 50 % against 10 %, (50 - 10) / 10 * 10 s, bounded by the 1 s window.
    assert quota.record_request_time(4.5, quota.now_ms()) == 1000


def test_a_fetch_asks_for_no_more_than_the_quota_lets_through_at_once() -> None:
    quotas = manager({ANY_CLIENT: {CONSUME: 1000.0, REQUEST: 1.0}}, samples=11)
    quota = quotas.of_client("User:x", "c")
    assert quota is not None
    assert quota.fetch_max_bytes(50 * 1024 * 1024) == 10_000  # 10 windows of 1 s
    assert quota.fetch_max_bytes(500) == 500


def test_follower_fetches_and_the_nodes_own_apis_are_not_held_back() -> None:
    quota = manager({ANY_CLIENT: {CONSUME: 1.0, REQUEST: 1.0}}).of_client("User:x", "c")
    assert quota is not None
    assert quota.covers(ApiKey.FETCH, SimpleNamespace(replica_id=-1))
    assert not quota.covers(ApiKey.FETCH, SimpleNamespace(replica_id=2))
    assert not quota.covers(
        ApiKey.FETCH, SimpleNamespace(replica_state=SimpleNamespace(replica_id=2, replica_epoch=1))
    )
    assert not quota.covers(ApiKey.WRITE_TXN_MARKERS, SimpleNamespace())
    assert quota.covers(ApiKey.METADATA, SimpleNamespace())


def test_acks_0_produce_counts_only_against_the_byte_rate() -> None:
    only_requests = manager({ANY_CLIENT: {REQUEST: 1.0}}).of_client("User:x", "c")
    assert only_requests is not None
    assert not only_requests.covers(ApiKey.PRODUCE, SimpleNamespace(acks=0))
    assert only_requests.covers(ApiKey.PRODUCE, SimpleNamespace(acks=1))
    bytes_too = manager({ANY_CLIENT: {REQUEST: 1.0, PRODUCE: 1.0}}).of_client("User:x", "c")
    assert bytes_too is not None
    assert bytes_too.covers(ApiKey.PRODUCE, SimpleNamespace(acks=0))


def header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(
        api_key=api_key, api_version=version, correlation_id=7, client_id="c", body_offset=0
    )


def usage(
    quota: Any,
    api_key: int,
    version: int,
    request: Any,
    size: int,
    muted: list[float],
    seconds: float = 0.0,
) -> QuotaUsage:
    """A request under quota whose handler has returned after `seconds`."""
    used = QuotaUsage(
        quota, header(api_key, version), request, request_bytes=size, mute=muted.append
    )
    used.handled(seconds)
    return used


def test_a_produce_over_its_quota_mutes_the_connection_before_it_is_answered() -> None:
    clock = ManualClock()
    quota = manager({ANY_CLIENT: {PRODUCE: 1000.0}}, clock).of_client("User:x", "c")
    muted: list[float] = []
    body = {"responses": [], "throttle_time": 0}
    within = usage(quota, ApiKey.PRODUCE, 9, SimpleNamespace(acks=1), 5_000, muted)
    assert within.settle(body) is body and muted == []
    # 5000 + 10000 bytes over 10 s: 1500/s, (1500 - 1000) / 1000 * 10 s.
    over = usage(quota, ApiKey.PRODUCE, 9, SimpleNamespace(acks=-1), 10_000, muted)
    assert muted == [5.0]  # at once: the next pipelined request waits
    answer = over.settle(body)  # (acks=all: answered once durable)
    assert answer["throttle_time"] == 5000 and body["throttle_time"] == 0
    assert muted == [5.0]
    silent = usage(quota, ApiKey.PRODUCE, 9, SimpleNamespace(acks=0), 1, muted)
    assert silent.settle(None) is None  # acks=0: no answer, the connection is muted all the same
    assert len(muted) == 2


def test_a_throttled_fetch_is_answered_empty_and_its_bytes_do_not_count() -> None:
    clock = ManualClock()
    quota = manager({ANY_CLIENT: {CONSUME: 1000.0}}, clock).of_client("User:x", "c")
    assert quota is not None and quota.consumer is not None
    muted: list[float] = []
    request = SimpleNamespace(replica_id=-1)
    first = usage(quota, ApiKey.FETCH, 12, request, 100, muted)
    data = Response([b"\x00" * 9_000])
    assert first.settle(data) is data
    second = usage(quota, ApiKey.FETCH, 12, request, 100, muted)
    answer = second.settle(Response([b"\x00" * 6_000]))
    # 15000 bytes over 10 s would be 1500/s: throttled 5 s, answered empty, 6000 not counted.
    assert isinstance(answer, Response)
    body = b"".join(answer.chunks)
    assert struct.unpack(">i", body[:4]) == (5000,)
    assert body[4:] == struct.pack(">hi", 0, 0) + b"\x01\x00"  # no error, no session, no topics
    assert muted == [5.0]
    assert quota.consumer.sensor.rate.measure(quota.now_ms()) == pytest.approx(900.0)


def test_a_throttled_answer_carries_the_time_only_where_its_version_has_the_field() -> None:
    quota = manager({ANY_CLIENT: {REQUEST: 0.0}}).of_client("User:x", "c")
    muted: list[float] = []
    metadata = usage(quota, ApiKey.METADATA, 12, SimpleNamespace(), 10, muted, 0.001)
    assert metadata.settle({"topics": []})["throttle_time"] == 1000  # bounded by the window
    handshake = usage(quota, ApiKey.SASL_HANDSHAKE, 1, SimpleNamespace(), 10, muted, 0.001)
    assert handshake.settle({"error_code": 0}) == {"error_code": 0}
    assert muted == [1.0, 1.0]
