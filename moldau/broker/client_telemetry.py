"""Client metrics (KIP-714) as a broker without a telemetry plugin answers them: Kafka's
ClientMetricsManager with no exporter behind it.

Kafka lists GetTelemetrySubscriptions and PushTelemetry in ApiVersions only when a
`metric.reporters` entry implements ClientTelemetry; Moldau has no such plugin, so it never lists
them (clients then never call them), and answers them as Kafka does when a client calls anyway:

- GetTelemetrySubscriptions: the client's instance id (a new one for the all-zero id), a
  subscription id, the compression types accepted (zstd, lz4, gzip, snappy), the push interval
  (5 minutes: there is no client-metrics subscription to match), at most 1 MiB a push, delta
  temporality and no requested metrics. A second request for the same instance before its
  interval has passed is THROTTLING_QUOTA_EXCEEDED, unless its last push failed with
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
- PushTelemetry: refused with INVALID_REQUEST for a reserved instance id or after the instance
  said it was terminating; THROTTLING_QUOTA_EXCEEDED before its interval (a push straight after a
  GetTelemetrySubscriptions, or a terminating one, is accepted); UNKNOWN_SUBSCRIPTION_ID,
  UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE as Kafka checks them, in that order. Accepted
  metrics are dropped: there is nothing to export them to.

Instances live in memory only, at most 16384 (least recently used first out), each forgotten
max(60 s, 3 push intervals) after its last request. Kafka also forgets an instance when its
connection closes; Moldau keeps it until it expires.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass

import crc32c

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError

# Kafka's order of preference: clients compress with the first one they support.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
DEFAULT_PUSH_INTERVAL_MS = 300_000  # client-metrics `interval.ms` default
TELEMETRY_MAX_BYTES = 1_048_576  # Kafka's `telemetry.max.bytes` default
INSTANCE_CACHE_SIZE = 16_384
INSTANCE_EXPIRY_MS = 60_000
_ZERO_UUID = uuid.UUID(int=0)
_RESERVED_IDS = frozenset({_ZERO_UUID, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED


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

    def get_subscriptions(self, client_instance_id: uuid.UUID | None) -> Subscription:
        """GetTelemetrySubscriptions; raises KafkaError(THROTTLING_QUOTA_EXCEEDED)."""
        now = self._clock.now_ms()
        if client_instance_id is None or client_instance_id == _ZERO_UUID:
            client_instance_id = self._new_instance_id()
        instance = self._instance(client_instance_id, now)
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
    ) -> None:
        """PushTelemetry; raises KafkaError with Kafka's error for a push it refuses."""
        if client_instance_id is None or client_instance_id in _RESERVED_IDS:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Invalid request from the client [{client_instance_id}], invalid client "
                "instance id",
            )
        now = self._clock.now_ms()
        instance = self._instance(client_instance_id, now)
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

    def _instance(self, client_instance_id: uuid.UUID, now: int) -> _ClientInstance:
        self._expire(now)
        instance = self._instances.get(client_instance_id)
        if instance is None:
            instance = _ClientInstance(
                subscription_id=_subscription_id((), DEFAULT_PUSH_INTERVAL_MS, client_instance_id),
                push_interval_ms=DEFAULT_PUSH_INTERVAL_MS,
                requested_metrics=(),
            )
            self._instances[client_instance_id] = instance
            while len(self._instances) > INSTANCE_CACHE_SIZE:
                self._instances.popitem(last=False)
        else:
            self._instances.move_to_end(client_instance_id)
        instance.expires_at_ms = now + max(INSTANCE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _expire(self, now: int) -> None:
        # Least recently used first; every instance has the same interval, so also the first
        # to expire.
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
