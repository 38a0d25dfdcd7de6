"""Parsing, validating and layering configuration values.

`BrokerConfig` merges, lowest to highest: built-in defaults, a `server.properties` file,
`MOLDAU_<PROPERTY>` environment variables (dots become underscores: `MOLDAU_LOG_DIRS`),
`--override key=value`, and dynamic broker configs from the metadata log.
`topic_config()` layers a topic's own configs over the broker's, as Kafka's LogConfig does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from moldau.config.definitions import (
    BROKER_KEYS,
    TOPIC_KEYS,
    TOPIC_SYNONYMS,
    ConfigKey,
    ConfigType,
)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


class ConfigSource(Enum):
    """Where a value came from, numbered as in DescribeConfigs v1+ (`config_source`)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """Turn a raw value (usually a string) into the key's type, or raise ConfigError with
    Kafka's message: "Invalid value abc for configuration retention.ms: Not a number of type
    LONG" (ConfigDef's parse errors and its Range, ValidString and ValidList validators)."""
    if raw is None:
        return None

    def invalid(reason: str, value: Any = raw) -> ConfigError:
        return ConfigError(f"Invalid value {value} for configuration {key.name}: {reason}")

    if key.type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return text == "true"
    if key.type in _INTEGER_BITS:
        limit = 2 ** (_INTEGER_BITS[key.type] - 1)
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = None
        if value is None or not -limit <= value < limit:  # Java's parse fails past the type
            raise invalid(f"Not a number of type {key.type.name}")
        _check_range(key, value, invalid)
        return value
    if key.type is ConfigType.DOUBLE:
        try:
            number = float(str(raw).strip())
        except ValueError:
            raise invalid(f"Not a number of type {key.type.name}") from None
        _check_range(key, number, invalid)
        return number
    if key.type is ConfigType.LIST:
        items = [part.strip() for part in str(raw).split(",") if part.strip()]
        if key.valid_values is not None:
            for item in items:
                if item not in key.valid_values:
                    raise invalid(_one_of(key.valid_values), item)
        return items
    text = str(raw)
    if key.valid_values is not None and text not in key.valid_values:
        raise invalid(_one_of(key.valid_values))
    return text


def _check_range(key: ConfigKey, number: float, invalid: Callable[[str], ConfigError]) -> None:
    low, high = key.minimum, key.maximum
    if key.also_valid and low is not None and high is not None:
        if number not in key.also_valid and not low <= number <= high:
            others = " or ".join(str(n) for n in key.also_valid)
            raise invalid(f"Value must be between {low:g} and {high:g} or equal to {others}")
        return
    if key.minimum is not None and number < key.minimum:
        raise invalid(f"Value must be at least {key.minimum:g}")
    if key.maximum is not None and number > key.maximum:
        reason = f" ({key.range_reason})" if key.range_reason else ""
        raise invalid(f"Value must be no more than {key.maximum:g}{reason}")


def _one_of(valid_values: tuple[str, ...]) -> str:
    return f"String must be one of: {', '.join(valid_values)}"


def format_value(key: ConfigKey, value: Any) -> str | None:
    """The string form Kafka shows for a value (DescribeConfigs, the CLI)."""
    if value is None:
        return None
    if key.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if key.type is ConfigType.LIST:
        return ",".join(value) if not isinstance(value, str) else value
    return str(value)


def read_properties_file(path: str) -> dict[str, str]:
    """Read a Java-style `.properties` file (key=value or key: value, # and ! comments)."""
    result: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        pending = ""
        for raw_line in handle:
            line = raw_line.rstrip("\n")
            if pending:
                line = pending + line.lstrip()
                pending = ""
            stripped = line.strip()
            if not stripped or stripped[0] in "#!":
                continue
            if stripped.endswith("\\"):
                pending = stripped[:-1]
                continue
            for index, char in enumerate(stripped):
                if char in "=:":
                    result[stripped[:index].strip()] = stripped[index + 1 :].strip()
                    break
            else:
                result[stripped] = ""
    return result


def properties_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """`MOLDAU_LOG_DIRS=/d` -> `log.dirs=/d` for every known broker key."""
    by_env_name = {"MOLDAU_" + name.upper().replace(".", "_"): name for name in BROKER_KEYS}
    return {by_env_name[k]: v for k, v in environ.items() if k in by_env_name}


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"Override {pair!r} must look like key=value")
        key, value = pair.split("=", 1)
        result[key.strip()] = value.strip()
    return result


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: Any
    source: ConfigSource
    key: ConfigKey | None

    @property
    def text(self) -> str | None:
        if self.key is None:
            return None if self.value is None else str(self.value)
        return format_value(self.key, self.value)


# broker.id and node.id name one number: set either, and both report it (Kafka's KRaft mode).
_ALIASES = {"broker.id": "node.id", "node.id": "broker.id"}


class BrokerConfig:
    """The effective broker properties: static (file, env, overrides) plus dynamic ones."""

    def __init__(self, static: Mapping[str, Any] | None = None) -> None:
        self._static: dict[str, Any] = {}
        self._dynamic: dict[str, Any] = {}
        self._dynamic_defaults: dict[str, Any] = {}
        self._unknown: dict[str, str] = {}
        for name, raw in (static or {}).items():
            key = BROKER_KEYS.get(name)
            if key is None:
                self._unknown[name] = str(raw)  # kept so DescribeConfigs can show it
                continue
            self._static[name] = parse_value(key, raw)

    @classmethod
    def load(
        cls,
        *,
        properties_file: str | None = None,
        overrides: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        merged: dict[str, Any] = {}
        if properties_file:
            merged.update(read_properties_file(properties_file))
        merged.update(properties_from_env(os.environ if environ is None else environ))
        merged.update(extra or {})
        merged.update(parse_overrides(overrides))
        return cls(merged)

    def set_dynamic(self, name: str, raw: str | None, *, cluster_default: bool = False) -> None:
        """A dynamic broker config from the metadata log: this node's own (resource "<node id>"),
        or with `cluster_default` the cluster-wide default (resource "")."""
        key = BROKER_KEYS.get(name)
        if key is None:
            raise ConfigError(f"Unknown broker configuration {name}")
        layer = self._dynamic_defaults if cluster_default else self._dynamic
        if raw is None:
            layer.pop(name, None)
        else:
            layer[name] = parse_value(key, raw)

    def entry(self, name: str) -> ConfigEntry:
        """The value in use and its layer, as Kafka reports it: this node's dynamic config, then
        the cluster-wide dynamic default, then server.properties (with the environment and
        --override), then the default."""
        key = BROKER_KEYS.get(name)
        if name in self._dynamic:
            return ConfigEntry(name, self._dynamic[name], ConfigSource.DYNAMIC_BROKER_CONFIG, key)
        if name in self._dynamic_defaults:
            return ConfigEntry(
                name,
                self._dynamic_defaults[name],
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                key,
            )
        if name in self._static:
            return ConfigEntry(name, self._static[name], ConfigSource.STATIC_BROKER_CONFIG, key)
        alias = _ALIASES.get(name)
        if alias in self._static:  # as Kafka's KafkaConfig.populateSynonyms
            return ConfigEntry(name, self._static[alias], ConfigSource.STATIC_BROKER_CONFIG, key)
        if key is None:
            return ConfigEntry(name, self._unknown.get(name), ConfigSource.UNKNOWN, None)
        return ConfigEntry(name, self._derived_default(name, key), ConfigSource.DEFAULT_CONFIG, key)

    def get(self, name: str) -> Any:
        return self.entry(name).value

    def is_set(self, name: str) -> bool:
        return name in self._dynamic or name in self._dynamic_defaults or name in self._static

    def explicit_names(self) -> list[str]:
        """Every property given by a file, the environment or an override, known or not."""
        return sorted({*self._static, *self._unknown})

    def unknown_names(self) -> list[str]:
        return sorted(self._unknown)

    def raw_unknown(self, name: str) -> str | None:
        return self._unknown.get(name)

    def entries(self) -> list[ConfigEntry]:
        return [self.entry(name) for name in sorted(BROKER_KEYS)]

    def _derived_default(self, name: str, key: ConfigKey) -> Any:
        if name == "log.retention.ms":
            minutes = self.get("log.retention.minutes")
            if minutes is not None:
                return int(minutes) * 60_000
            return int(self.get("log.retention.hours")) * 3_600_000
        if name == "log.roll.ms":
            return int(self.get("log.roll.hours")) * 3_600_000
        if name == "log.roll.jitter.ms":
            return int(self.get("log.roll.jitter.hours")) * 3_600_000
        if name == "log.flush.interval.ms":
            return self.get("log.flush.scheduler.interval.ms")
        if name == "broker.id":
            return self.get("node.id")
        if name == "log.dirs" and self.is_set("log.dir"):
            return [self.get("log.dir")]
        if name == "advertised.listeners":
            return self.get("listeners")
        if isinstance(key.default, str) and key.type is not ConfigType.STRING:
            return parse_value(key, key.default)
        return key.default

    # Properties read on hot paths, named for readability.
    @property
    def node_id(self) -> int:
        return int(self.get("node.id"))

    @property
    def log_dirs(self) -> list[str]:
        return list(self.get("log.dirs"))

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config's broker-level value (what a topic with no overrides uses)."""
        return {name: self.topic_entry(name, {}).value for name in TOPIC_KEYS}

    def topic_entry(self, name: str, overrides: Mapping[str, Any]) -> ConfigEntry:
        key = TOPIC_KEYS[name]
        if name in overrides:
            return ConfigEntry(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG, key)
        if name not in TOPIC_SYNONYMS:
            return ConfigEntry(
                name, parse_value(key, key.default), ConfigSource.DEFAULT_CONFIG, key
            )
        broker_entry = self.entry(TOPIC_SYNONYMS[name])
        value = broker_entry.value
        if value is None:
            value = key.default
        source = broker_entry.source
        if source is ConfigSource.DEFAULT_CONFIG:
            return ConfigEntry(name, value, ConfigSource.DEFAULT_CONFIG, key)
        return ConfigEntry(name, value, source, key)

    def topic_config(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The effective configuration of a topic: its own values over the broker's."""
        return {name: self.topic_entry(name, overrides).value for name in TOPIC_KEYS}


def validate_topic_configs(raw: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse a topic's configs as given by a client; ConfigError names the first bad one."""
    parsed: dict[str, Any] = {}
    for name, value in raw.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic config: {name}")
        parsed[name] = parse_value(key, value)
        if not key.applies and parsed[name] != parse_value(key, key.default):
            # Kafka's value would ask for something Moldau does not do: refuse it, not keep it.
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: it has no effect in Moldau "
                f"({key.not_applicable}) and may only be {format_value(key, key.default)}"
            )
        if name.endswith(".replication.throttled.replicas"):
            parse_throttled_replicas(name, parsed[name])
    return parsed


def parse_throttled_replicas(name: str, items: list[str]) -> frozenset[tuple[int, int]] | None:
    """`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
    (partition, broker) pairs, or None for `*` (every replica); ConfigError otherwise."""
    if items == ["*"]:
        return None
    pairs = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if not (partition.strip().isdigit() and broker.strip().isdigit()):
            raise ConfigError(
                f"Invalid value {','.join(items)!r} for configuration {name}: it must be * or "
                "a list of replicas as partition:broker, e.g. 0:101,0:102,1:101"
            )
        pairs.add((int(partition), int(broker)))
    return frozenset(pairs)
