"""Client quotas enforced, as Kafka's ClientQuotaManager and ClientRequestQuotaManager do:
byte rates (KIP-13) per user and client id (KIP-55), request time (KIP-124), and throttling
by an answer sent at once with its throttle time and a connection muted meanwhile (KIP-219).

`ClientQuotas` (one per node) follows the metadata image's `client_quotas` (the node publishes
each new image to it) and resolves, per quota key, the most specific entity that sets it for a
(user, client id) — Kafka's order:

    1 user + client-id        4 <default> user + client-id      7 client-id
    2 user + <default> id     5 <default> user + <default> id   8 <default> client-id
    3 user                    6 <default> user

The usage is recorded in a sensor per (quota key, user, client id) where the entity names
them: an entity without a client id (3, 6) is shared by every client id of its user, one
without a user (7, 8) by every user of its client id, and a default entity gives each user or
client id a sensor (and a quota) of its own. A sensor is Kafka's rate
(`moldau.rate.SampledRate`, `quota.window.num` windows of `quota.window.size.seconds`); once a
value is recorded above the quota the throttle time is `(rate - quota) / quota * window`, the
delay that brings the rate back to the quota, bounded by one window for request time.

What is counted (`QuotaUsage`, by the dispatcher when the handler returns and when its
answer is known):
- producer_byte_rate: the Produce request's size (Kafka's `request.sizeInBytes`), when the
  handler returns (Kafka records it with the answer, but serves one request of a connection
  at a time: recorded early, a client's next pipelined request waits for the throttle);
- consumer_byte_rate: a consumer's Fetch response's size; a throttled fetch is answered empty
  and its bytes are not counted, and a fetch asks for at most what the quota lets through in
  `quota.window.num - 1` windows (`ClientQuota.fetch_max_bytes`);
- request_percentage: the handler's time (the synchronous part of it, on the event loop; what
  runs after it returned a Deferred or in a task is not counted) as a percentage of one
  thread's, for every request but acks=0 Produce, follower fetches and the inter-node APIs.
Follower fetches, the controller's listeners and connections still authenticating are never
held back. controller_mutation_rate is accepted and stored but not enforced.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from moldau.broker.responses import Response
from moldau.clock import Clock, monotonic_ms
from moldau.config.values import BrokerConfig
from moldau.metadata.records import ClientQuotaEntity
from moldau.protocol.adapter import RequestHeader, response_schema
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.fetch_request import replica_of
from moldau.protocol.fetch_response import encode_fetch_response
from moldau.rate import SampledRate, kafka_round

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
ENFORCED_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE})

USER = "user"
CLIENT_ID = "client-id"

# Kafka's cluster actions: the nodes' own traffic, never throttled (`sendResponseExemptThrottle`).
EXEMPT_APIS = frozenset(
    {
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
        ApiKey.ENVELOPE,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.CONTROLLER_REGISTRATION,
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.FETCH_SNAPSHOT,
    }
)

INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka drops a sensor idle for an hour
SENSOR_SWEEP_INTERVAL_MS = 60 * 1000
MAX_CACHED_CLIENTS = 10_000
MAX_THROTTLE_MS = 0x7FFFFFFF  # throttle_time_ms is an int32
PERCENT_PER_SECOND = 100.0  # request time: a second of one thread's time is 100 %


def user_of(principal: str) -> str:
    """The user name of a principal (`User:alice` -> `alice`), as Kafka's `principal.getName`."""
    _type, separator, name = principal.partition(":")
    return name if separator else principal


def precedence(user: str, client_id: str) -> list[tuple[ClientQuotaEntity, tuple[str, str]]]:
    """The entities that may hold a client's quota, most specific first, each with the
    (user, client id) its sensor is kept under. Entities are keyed as the image keys them
    (`quota_control.entity_key`: sorted by type, so client-id before user)."""
    both = (user, client_id)
    return [
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's throttle time: how long no more may be recorded for the rate over `window_ms` to
    come back from `observed` to `bound` (O * W / (W + X) = T, so X = (O - T) / T * W)."""
    if observed <= bound:
        return 0
    if bound <= 0:
        return MAX_THROTTLE_MS
    return min(kafka_round((observed - bound) / bound * window_ms), MAX_THROTTLE_MS)


class QuotaSensor:
    """The usage of one quota key by one (user, client id): a rate, and when it was last used."""

    __slots__ = ("last_record_ms", "rate")

    def __init__(self, rate: SampledRate, now_ms: int) -> None:
        self.rate = rate
        self.last_record_ms = now_ms


@dataclasses.dataclass(frozen=True, slots=True)
class Limit:
    """One quota a client is held to: its bound, the entity that set it, and its sensor."""

    bound: float
    entity: ClientQuotaEntity
    sensor: QuotaSensor


class ClientQuota:
    """The quotas one (user, client id) is held to: a `Limit` per quota key that applies."""

    __slots__ = ("_clock", "_samples", "_window_ms", "consumer", "producer", "request")

    def __init__(
        self,
        *,
        producer: Limit | None,
        consumer: Limit | None,
        request: Limit | None,
        clock: Clock,
        samples: int,
        window_ms: int,
    ) -> None:
        self.producer = producer
        self.consumer = consumer
        self.request = request
        self._clock = clock
        self._samples = samples
        self._window_ms = window_ms

    def covers(self, api_key: int, request: Any) -> bool:
        """Whether this request counts against a quota of this client."""
        if api_key == ApiKey.PRODUCE:
            return self.producer is not None or (self.request is not None and request.acks != 0)
        if api_key == ApiKey.FETCH:
            if self.consumer is None and self.request is None:
                return False
            replica_id, _epoch = replica_of(request)
            return replica_id < 0  # (a follower's fetch is replication, not a client's)
        return self.request is not None and api_key not in EXEMPT_APIS

    def now_ms(self) -> int:
        return monotonic_ms(self._clock)

    def record(self, limit: Limit | None, value: float, now_ms: int) -> int:
        """Record `value` against `limit`; the throttle time it earns (0 within the quota)."""
        if limit is None:
            return 0
        sensor = limit.sensor
        sensor.rate.record(value, now_ms)
        sensor.last_record_ms = now_ms
        observed, window_ms = sensor.rate.measure_over(now_ms)
        if observed <= limit.bound:
            return 0
        return throttle_time_ms(observed, limit.bound, window_ms)

    def record_request_time(self, seconds: float, now_ms: int) -> int:
        """Record handler time; the throttle is at most one window (Kafka's
        ClientRequestQuotaManager bounds it so)."""
        if self.request is None:
            return 0
        throttle = self.record(self.request, seconds * PERCENT_PER_SECOND, now_ms)
        return min(throttle, self._window_ms)

    def fetch_max_bytes(self, max_bytes: int) -> int:
        """A consumer's fetch limit under its quota: what `quota.window.num - 1` windows let
        through, since a larger answer would be throttled whatever came before it."""
        consumer = self.consumer
        if consumer is None:
            return max_bytes
        window_bytes = consumer.bound * (self._samples - 1) * self._window_ms / 1000.0
        return int(min(max_bytes, window_bytes))


_UNRESOLVED: Any = object()


class ClientQuotas:
    """The node's client quotas: resolved from the image's (`follow`, called with each new
    image), cached per (principal, client id) until the image's quotas change (compared by
    identity, as `authorization.py` does). `enforced` is False while no quota is set that
    Moldau enforces: the dispatcher then looks no further."""

    def __init__(self, *, clock: Clock, samples: int = 11, window_s: int = 1) -> None:
        self._clock = clock
        self._samples = samples
        self._window_ms = window_s * 1000
        self._quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = {}
        self.enforced = False
        self._clients: dict[tuple[str, str | None], ClientQuota | None] = {}
        self._sensors: dict[tuple[str, str, str], QuotaSensor] = {}
        self._last_sweep_ms = monotonic_ms(clock)

    @classmethod
    def of(cls, config: BrokerConfig, clock: Clock) -> ClientQuotas:
        return cls(
            clock=clock,
            samples=int(config.get("quota.window.num")),
            window_s=int(config.get("quota.window.size.seconds")),
        )

    def follow(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        """The image's quotas (the same mapping until they change): what resolved from the
        previous ones is forgotten, what was used (the sensors) is kept."""
        if quotas is self._quotas:
            return
        self._quotas = quotas
        self._clients.clear()
        self.enforced = any(not ENFORCED_KEYS.isdisjoint(values) for values in quotas.values())

    def of_client(self, principal: str, client_id: str | None) -> ClientQuota | None:
        """The quotas that hold this client back, None if none does."""
        if not self.enforced:
            return None
        key = (principal, client_id)
        quota = self._clients.get(key, _UNRESOLVED)
        if quota is _UNRESOLVED:
            quota = self._resolve(principal, client_id or "")
            if len(self._clients) >= MAX_CACHED_CLIENTS:
                self._clients.clear()
            self._clients[key] = quota
        return quota  # type: ignore[no-any-return]

    @property
    def sensor_count(self) -> int:
        return len(self._sensors)

    def _resolve(self, principal: str, client_id: str) -> ClientQuota | None:
        now_ms = monotonic_ms(self._clock)
        if now_ms - self._last_sweep_ms >= SENSOR_SWEEP_INTERVAL_MS:
            self._sweep(now_ms)
        candidates = precedence(user_of(principal), client_id)
        limits = [self._limit(key, candidates, now_ms) for key in _KEYS]
        if not any(limits):
            return None
        producer, consumer, request = limits
        return ClientQuota(
            producer=producer,
            consumer=consumer,
            request=request,
            clock=self._clock,
            samples=self._samples,
            window_ms=self._window_ms,
        )

    def _limit(
        self,
        key: str,
        candidates: list[tuple[ClientQuotaEntity, tuple[str, str]]],
        now_ms: int,
    ) -> Limit | None:
        for entity, (user_tag, client_tag) in candidates:
            values = self._quotas.get(entity)
            if values is None or key not in values:
                continue
            sensor_key = (key, user_tag, client_tag)
            sensor = self._sensors.get(sensor_key)
            if sensor is None:
                rate = SampledRate(samples=self._samples, window_ms=self._window_ms)
                sensor = self._sensors[sensor_key] = QuotaSensor(rate, now_ms)
            return Limit(bound=float(values[key]), entity=entity, sensor=sensor)
        return None

    def _sweep(self, now_ms: int) -> None:
        """Forget sensors idle for an hour (and the cached clients that point at them)."""
        self._last_sweep_ms = now_ms
        idle = [
            key
            for key, sensor in self._sensors.items()
            if now_ms - sensor.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS
        ]
        if idle:
            for key in idle:
                del self._sensors[key]
            self._clients.clear()


_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)


class QuotaUsage:
    """One request of a client under quota, in two steps taken by the dispatcher.

    `handled(seconds)`, as soon as the handler has returned: records what is known then (the
    handler's time, a Produce request's size) and mutes the connection at once if that is over
    a quota, so that a client sending many requests ahead (librdkafka pipelines its produce
    requests) is held back from the next one, as Kafka holds back its one request in flight.
    `settle(answer)`, once the answer is known: records a Fetch response's size and gives the
    answer to send, with the throttle time in it (an empty one for a throttled fetch)."""

    __slots__ = ("header", "mute", "quota", "request", "request_bytes", "throttle_ms")

    def __init__(
        self,
        quota: ClientQuota,
        header: RequestHeader,
        request: Any,
        *,
        request_bytes: int,
        mute: Callable[[float], None] | None,
    ) -> None:
        self.quota = quota
        self.header = header
        self.request = request
        self.request_bytes = request_bytes
        self.mute = mute
        self.throttle_ms = 0

    def handled(self, handler_seconds: float) -> None:
        quota = self.quota
        now_ms = quota.now_ms()
        if self.header.api_key == ApiKey.PRODUCE:
            request_ms = 0
            if self.request.acks != 0:  # (Kafka exempts acks=0 from request time)
                request_ms = quota.record_request_time(handler_seconds, now_ms)
            bandwidth_ms = quota.record(quota.producer, self.request_bytes, now_ms)
            self._throttle(max(request_ms, bandwidth_ms))
        else:
            self._throttle(quota.record_request_time(handler_seconds, now_ms))

    def settle(self, result: Any) -> Any:
        header = self.header
        if header.api_key == ApiKey.FETCH:
            return self._settle_fetch(result)
        if self.throttle_ms > 0:
            return with_throttle_time(header, result, self.throttle_ms)
        return result

    def _settle_fetch(self, result: Any) -> Any:
        quota = self.quota
        consumer = quota.consumer
        size = 0
        if consumer is not None and isinstance(result, Response):
            size = response_size(result.chunks)
            now_ms = quota.now_ms()
            bandwidth_ms = quota.record(consumer, size, now_ms)
            if bandwidth_ms > 0 or self.throttle_ms > 0:
                # Answered empty: its bytes are not sent, so they do not count (Kafka unrecords).
                consumer.sensor.rate.record(-size, now_ms)
            self._throttle(bandwidth_ms)
        if self.throttle_ms <= 0:
            return result
        return Response(
            encode_fetch_response(
                self.header.api_version,
                throttle_time_ms=self.throttle_ms,
                error_code=0,
                session_id=0,
                topics=[],
            )
        )

    def _throttle(self, throttle_ms: int) -> None:
        if throttle_ms <= self.throttle_ms:
            return
        self.throttle_ms = throttle_ms
        if self.mute is not None:
            self.mute(throttle_ms / 1000.0)


def response_size(chunks: list[Any]) -> int:
    return sum(
        len(chunk) if isinstance(chunk, bytes | bytearray | memoryview) else chunk.length
        for chunk in chunks
    )


def with_throttle_time(header: RequestHeader, result: Any, throttle_ms: int) -> Any:
    """The answer with `throttle_ms` in its throttle time (an answer whose version has none is
    sent as it is: the muted connection still holds the client back)."""
    if type(result) is dict and _has_throttle_time(header.api_key, header.api_version):
        return {**result, "throttle_time": throttle_ms}
    return result


@functools.cache
def _has_throttle_time(api_key: int, version: int) -> bool:
    schema = response_schema(api_key, version)
    return any(field.name == "throttle_time" for field in dataclasses.fields(schema))
