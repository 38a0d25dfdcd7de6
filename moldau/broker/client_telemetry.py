"""Client metrics (KIP-714) as a broker without a telemetry plugin answers them: Kafka's
ClientMetricsManager with no exporter behind it.

Kafka lists GetTelemetrySubscriptions and PushTelemetry in ApiVersions only when a
`metric.reporters` entry implements ClientTelemetry; Moldau has no such plugin, so it never lists
them (clients then never call them), and answers them as Kafka does when a client calls anyway:

- GetTelemetrySubscriptions: the client's instance id (a new one for the all-zero id), a
  subscription id, the compression types accepted (zstd, lz4, gzip, snappy), the push interval
  and the metrics of the client-metrics subscriptions that match the client
  (`moldau.controller.client_metrics`; 5 minutes and no metrics when none does), at most 1 MiB a
  push, delta temporality. A second request for the same instance before its interval has passed
  is THROTTLING_QUOTA_EXCEEDED, unless its last push failed with UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE.
- PushTelemetry: refused with INVALID_REQUEST for a reserved instance id or after the instance
  said it was terminating; THROTTLING_QUOTA_EXCEEDED before its interval (a push straight after a
  GetTelemetrySubscriptions, or a terminating one, is accepted); UNKNOWN_SUBSCRIPTION_ID,
  UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE as Kafka checks them, in that order. Accepted
  metrics are dropped: there is nothing to export them to.

When the subscriptions change, each instance is matched again at its next request and starts
afresh (its next push with the old subscription id is UNKNOWN_SUBSCRIPTION_ID, so the client asks
again), as Kafka re-evaluates an instance older than the subscriptions.

Instances live in memory only, at most 16384 (least recently used first out), each forgotten
max(60 s, 3 push intervals) after its last request. Kafka also forgets an instance when its
connection closes; Moldau keeps it until it expires.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import crc32c

from moldau.clock import Clock
from moldau.controller import client_metrics
from moldau.protocol.errors import ErrorCode, KafkaError

# Kafka's order of preference: clients compress with the first one they support.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
DEFAULT_PUSH_INTERVAL_MS = client_metrics.DEFAULT_INTERVAL_MS
TELEMETRY_MAX_BYTES = 1_048_576  # Kafka's `telemetry.max.bytes` default
INSTANCE_CACHE_SIZE = 16_384
INSTANCE_EXPIRY_MS = 60_000
_ZERO_UUID = uuid.UUID(int=0)
_RESERVED_IDS = frozenset({_ZERO_UUID, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """What GetTelemetrySubscriptions answers (its response's fields)."""

    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class _ClientInstance:
    client: Mapping[str, str]  # what subscriptions match on: selector -> value
    subscriptions_version: int
    subscription_id: int
    push_interval_ms: int
    requested_metrics: tuple[str, ...]
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_error: ErrorCode = ErrorCode.none
    terminating: bool = False
    expires_at_ms: int = 0


class ClientTelemetry:
    """The client instances this broker has seen, and the answers to their telemetry requests."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._instances: OrderedDict[uuid.UUID, _ClientInstance] = OrderedDict()
        self._subscriptions: tuple[client_metrics.Subscription, ...] = ()
        self._subscriptions_version = 0

    def set_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The cluster's client-metrics subscriptions (name -> configs) changed."""
        subscriptions = []
        for name, subscription_configs in sorted(configs.items()):
            try:
                subscriptions.append(client_metrics.parse_subscription(name, subscription_configs))
            except KafkaError as exc:  # (the controller checked them: a newer version's key)
                log.warning("ignoring client-metrics subscription %r: %s", name, exc.message)
        self._subscriptions = tuple(subscriptions)
        self._subscriptions_version += 1

    def get_subscriptions(
        self, client_instance_id: uuid.UUID | None, client: Mapping[str, str] | None = None
    ) -> Subscription:
        """GetTelemetrySubscriptions; raises KafkaError(THROTTLING_QUOTA_EXCEEDED). `client`
        describes the client as subscriptions match it (selector -> value; the instance id is
        added here)."""
        now = self._clock.now_ms()
        if client_instance_id is None or client_instance_id == _ZERO_UUID:
            client_instance_id = self._new_instance_id()
        instance = self._instance(client_instance_id, now, client)
        last_request_ms = max(instance.last_get_ms, instance.last_push_ms)
        if now - last_request_ms < instance.push_interval_ms and instance.last_error not in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        ):
            raise KafkaError(
                ErrorCode.throttling_quota_exceeded,
                f"Request from the client [{client_instance_id}] arrived before the next push "
                "interval time",
            )
        instance.last_get_ms = now
        instance.last_error = ErrorCode.none
        return Subscription(
            client_instance_id=client_instance_id,
            subscription_id=instance.subscription_id,
            accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
            push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=TELEMETRY_MAX_BYTES,
            delta_temporality=True,
            requested_metrics=instance.requested_metrics,
        )

    def push(
        self,
        client_instance_id: uuid.UUID | None,
        *,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        client: Mapping[str, str] | None = None,
    ) -> None:
        """PushTelemetry; raises KafkaError with Kafka's error for a push it refuses."""
        if client_instance_id is None or client_instance_id in _RESERVED_IDS:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Invalid request from the client [{client_instance_id}], invalid client "
                "instance id",
            )
        now = self._clock.now_ms()
        instance = self._instance(client_instance_id, now, client)
        try:
            self._check_push(
                instance,
                now=now,
                subscription_id=subscription_id,
                terminating=terminating,
                compression_type=compression_type,
                size=len(metrics),
            )
        except KafkaError as exc:
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = terminating
        instance.last_error = ErrorCode.none

    def _check_push(
        self,
        instance: _ClientInstance,
        *,
        now: int,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
    ) -> None:
        if instance.terminating:
            raise KafkaError(
                ErrorCode.invalid_request,
                "The client sent a terminating push before: no further pushes are accepted",
            )
        # A push straight after a GetTelemetrySubscriptions is accepted whatever the interval:
        # clients jitter their first push between 0.5 and 1.5 intervals.
        accepted = (
            instance.last_get_ms > instance.last_push_ms
            or now - instance.last_push_ms >= instance.push_interval_ms
        )
        if accepted:
            instance.last_push_ms = now
        elif not terminating:
            raise KafkaError(
                ErrorCode.throttling_quota_exceeded,
                "Request from the client arrived before the next push interval time",
            )
        if subscription_id != instance.subscription_id:
            raise KafkaError(
                ErrorCode.unknown_subscription_id, "Unknown client subscription id for the client"
            )
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise KafkaError(
                ErrorCode.unsupported_compression_type,
                f"Unknown compression type [{compression_type}] is received in telemetry request",
            )
        if size > TELEMETRY_MAX_BYTES:
            raise KafkaError(
                ErrorCode.telemetry_too_large,
                "Telemetry request is larger than the maximum allowed size "
                f"[{TELEMETRY_MAX_BYTES}]",
            )

    def _instance(
        self, client_instance_id: uuid.UUID, now: int, client: Mapping[str, str] | None
    ) -> _ClientInstance:
        self._expire(now)
        instance = self._instances.get(client_instance_id)
        if instance is not None and instance.expires_at_ms <= now:
            instance = None  # (expired behind a longer-lived one: see `_expire`)
        if instance is None:
            described = dict(client or {})
            described["client_instance_id"] = str(client_instance_id)
            instance = self._matched(client_instance_id, described)
            self._instances[client_instance_id] = instance
            while len(self._instances) > INSTANCE_CACHE_SIZE:
                self._instances.popitem(last=False)
        elif instance.subscriptions_version < self._subscriptions_version:
            instance = self._matched(client_instance_id, instance.client)
            self._instances[client_instance_id] = instance
        self._instances.move_to_end(client_instance_id)
        instance.expires_at_ms = now + max(INSTANCE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _matched(self, client_instance_id: uuid.UUID, client: Mapping[str, str]) -> _ClientInstance:
        """A fresh instance with what the current subscriptions give the client: the union of
        the matching ones' metrics (`*` alone if one asks for every metric) and the shortest of
        their intervals, never longer than the default."""
        metrics: set[str] = set()
        interval = DEFAULT_PUSH_INTERVAL_MS
        for subscription in self._subscriptions:
            if subscription.matches(client):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        if client_metrics.ALL_METRICS in metrics:
            metrics = {client_metrics.ALL_METRICS}
        requested = tuple(sorted(metrics))
        return _ClientInstance(
            client=client,
            subscriptions_version=self._subscriptions_version,
            subscription_id=_subscription_id(requested, interval, client_instance_id),
            push_interval_ms=interval,
            requested_metrics=requested,
        )

    def _expire(self, now: int) -> None:
        # Least recently used first. Intervals differ between subscriptions, so an expired
        # instance can sit behind one that has not: it is forgotten when it comes to the front,
        # when it is asked for (`_instance`), or when the cache is full.
        while self._instances:
            key, oldest = next(iter(self._instances.items()))
            if oldest.expires_at_ms > now:
                return
            del self._instances[key]

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in _RESERVED_IDS:
                return candidate


def _subscription_id(
    metrics: tuple[str, ...], push_interval_ms: int, client_instance_id: uuid.UUID
) -> int:
    """An id that changes whenever the subscription does (Kafka: the CRC32C of the metrics and
    the interval, XORed with a hash of the instance id), as a signed int32."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(push_interval_ms)
    crc = crc32c.crc32c(text.encode())
    bits = client_instance_id.int
    folded = (bits >> 64) ^ (bits & 0xFFFF_FFFF_FFFF_FFFF)
    folded = (folded >> 32) ^ (folded & 0xFFFF_FFFF)
    value = (crc ^ folded) & 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value
