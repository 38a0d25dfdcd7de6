"""Client-metrics subscriptions (KIP-714): the configs of a `client-metrics` config resource
(type 16), checked as Kafka's ClientMetricsConfigs checks them, and the clients each one matches.

A subscription is a named resource with three configs:

- `metrics` (list, default empty): the metric-name prefixes matched clients push; `*` is every
  metric.
- `interval.ms` (int, default 300000, from 100 to 3600000): how often matched clients push.
- `match` (list, default empty: every client): `selector=regex` entries, every one of which must
  match the whole of the client's value. The selectors are client_instance_id, client_id,
  client_software_name, client_software_version, client_source_address and client_source_port.

A client matched by several subscriptions gets the union of their metrics and the shortest of
their intervals (Kafka's ClientMetricsManager). Regular expressions are RE2's (google-re2), the
syntax Kafka is moving subscriptions to (RE2/J): matching takes time linear in the client's value
whatever the pattern, so a client id cannot make a broker backtrack for seconds. A pattern only
java.util.regex accepts (backreferences, lookaround, possessive `*+`) is refused when set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import re2

from moldau.config.keys import ConfigKey, ConfigType, config_key
from moldau.config.values import ConfigError, parse_value
from moldau.protocol.errors import ErrorCode, KafkaError

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000

KEYS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        config_key(METRICS, ConfigType.LIST, "", "Telemetry metric name prefix list"),
        config_key(INTERVAL_MS, ConfigType.INT, DEFAULT_INTERVAL_MS, "Metrics push interval in ms"),
        config_key(MATCH, ConfigType.LIST, "", "Client match criteria"),
    )
}
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


class Pattern(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # (a refused pattern is the caller's answer, not a log line)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """One subscription's parsed configs."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[str, Pattern]

    def matches(self, client: Mapping[str, str]) -> bool:
        """Whether a client, described by selector -> value, is subscribed."""
        return all(
            pattern.fullmatch(client.get(selector, "")) is not None
            for selector, pattern in self.match.items()
        )


def check_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Subscription name can't be empty")


def key_of(name: str) -> ConfigKey:
    key = KEYS.get(name)
    if key is None:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown client metrics configuration: {name}")
    return key


def validate(configs: Mapping[str, str]) -> None:
    """Raise KafkaError with Kafka's code and message for configs a subscription cannot have."""
    parse_subscription("", configs)


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription `configs` describe (defaults for what is unset); raises KafkaError."""
    for config in configs:
        key_of(config)
    try:
        metrics = parse_value(KEYS[METRICS], configs.get(METRICS, ""))
        interval = parse_value(KEYS[INTERVAL_MS], configs.get(INTERVAL_MS, DEFAULT_INTERVAL_MS))
        entries = parse_value(KEYS[MATCH], configs.get(MATCH, ""))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
        )
    return Subscription(
        name=name,
        metrics=frozenset(metrics),
        interval_ms=interval,
        match={selector: pattern for selector, pattern in map(_match_entry, entries)},
    )


def _match_entry(entry: str) -> tuple[str, Pattern]:
    """`selector=regex`, split as Java's `String.split("=")` splits (on every `=`, trailing
    empty parts dropped): anything but exactly two parts is illegal."""
    parts = entry.split("=")
    while parts and not parts[-1]:
        parts.pop()
    illegal = KafkaError(ErrorCode.invalid_config, f"Illegal client matching pattern: {entry}")
    if len(parts) != 2 or parts[0].strip() not in SELECTORS:
        raise illegal
    try:
        pattern: Pattern = re2.compile(parts[1].strip(), options=_RE2_OPTIONS)
    except re2.error:
        raise illegal from None
    return parts[0].strip(), pattern
