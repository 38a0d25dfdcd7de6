"""What DescribeConfigs (and CreateTopics v5+) report for a topic, a broker, a client-metrics
subscription or a group, as Kafka's ConfigHelper.

For each config: the effective value, where it came from (`ConfigSource`), whether it is read-only
or sensitive (sensitive values are reported as null), its type and documentation, and the
synonyms, the layers it could come from in order of precedence:

    topic:  DYNAMIC_TOPIC_CONFIG > DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG
            > STATIC_BROKER_CONFIG > DEFAULT_CONFIG
    broker: the same without the topic layer; Kafka 4.1's broker keys always, the others
            (`ConfigKey.described_unset` False) only once set, as Kafka lists those

Dynamic layers come from the metadata image (broker resource "<node id>" and the cluster
default ""); static ones from the node's `BrokerConfig`. A client-metrics subscription reports the
configs set on it (CLIENT_METRICS_CONFIG) and the others' defaults, as Kafka 4.1 does; a group
its share.* configs, those set on it (GROUP_CONFIG) and the others at the broker's value.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from moldau.config.definitions import BROKER_KEYS, TOPIC_KEYS, TOPIC_SYNONYMS, ConfigKey, ConfigType
from moldau.config.share_groups import BROKER_DEFAULTS, GROUP_KEYS
from moldau.config.values import BrokerConfig, ConfigError, ConfigSource, format_value, parse_value
from moldau.controller import client_metrics
from moldau.controller.topic_names import validate_topic_name
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

# DescribeConfigs v3+ `config_type` codes (Kafka's DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_CODES: dict[ConfigType, int] = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.CLASS: 8,
    ConfigType.PASSWORD: 9,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedConfig:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: int
    documentation: str | None
    synonyms: tuple[ConfigSynonym, ...]

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def describe_configs(
    image: MetadataImage,
    config: BrokerConfig,
    *,
    resource_type: int,
    resource_name: str,
    node_id: int,
    keys: Collection[str] | None = None,
) -> list[DescribedConfig]:
    """Every config of the resource (or only `keys`), sorted by name; raises KafkaError."""
    if resource_type == ConfigResourceType.TOPIC:
        return describe_topic_configs(image, config, resource_name, node_id=node_id, keys=keys)
    if resource_type == ConfigResourceType.BROKER:
        return describe_broker_configs(image, config, resource_name, node_id=node_id, keys=keys)
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        return describe_client_metrics(image, resource_name, keys=keys)
    if resource_type == ConfigResourceType.GROUP:
        return describe_group_configs(image, config, resource_name, keys=keys)
    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def describe_topic_configs(
    image: MetadataImage,
    config: BrokerConfig,
    topic_name: str,
    *,
    node_id: int,
    keys: Collection[str] | None = None,
) -> list[DescribedConfig]:
    validate_topic_name(topic_name)
    topic = image.topics.get(topic_name)
    if topic is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"The topic '{topic_name}' does not exist."
        )
    return [
        describe_topic_config(image, config, name, topic.configs, node_id=node_id)
        for name in sorted(TOPIC_KEYS)
        if keys is None or name in keys
    ]


def describe_topic_config(
    image: MetadataImage,
    config: BrokerConfig,
    name: str,
    topic_configs: Mapping[str, str],
    *,
    node_id: int,
) -> DescribedConfig:
    key = TOPIC_KEYS[name]
    synonyms: list[ConfigSynonym] = []
    if name in topic_configs:
        synonyms.append(
            ConfigSynonym(
                name=name,
                value=_normalized(key, topic_configs[name]),
                source=ConfigSource.DYNAMIC_TOPIC_CONFIG,
            )
        )
    if name not in TOPIC_SYNONYMS:  # (no broker property behind it: its own default)
        synonyms.append(
            ConfigSynonym(
                name=name,
                value=format_value(key, parse_value(key, key.default)),
                source=ConfigSource.DEFAULT_CONFIG,
            )
        )
        return _described(name, key, synonyms, read_only=key.read_only)
    broker_layers = _broker_layers(image, config, TOPIC_SYNONYMS[name], node_id=node_id)
    # A broker property with no value at all (e.g. log.retention.ms unset) falls to the topic
    # key's own default, still reported as DEFAULT_CONFIG.
    for layer in broker_layers:
        if layer.source is ConfigSource.DEFAULT_CONFIG and layer.value is None:
            layer = ConfigSynonym(
                name=layer.name, value=format_value(key, key.default), source=layer.source
            )
        synonyms.append(layer)
    return _described(name, key, synonyms, read_only=key.read_only)


def describe_broker_configs(
    image: MetadataImage,
    config: BrokerConfig,
    resource_name: str,
    *,
    node_id: int,
    keys: Collection[str] | None = None,
) -> list[DescribedConfig]:
    names = sorted(BROKER_KEYS) if keys is None else sorted(k for k in keys if k in BROKER_KEYS)
    defaults = image.broker_configs.get("", {})
    if resource_name == "":
        # The cluster-wide default resource shows only what is set there.
        return [
            _described(
                name,
                BROKER_KEYS[name],
                [
                    ConfigSynonym(
                        name=name,
                        value=_normalized(BROKER_KEYS[name], defaults[name]),
                        source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                    )
                ],
                read_only=BROKER_KEYS[name].read_only,
            )
            for name in names
            if name in defaults
        ]
    if resource_name != str(node_id):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id} or empty string, but received "
            f"{resource_name}",
        )
    own = image.broker_configs.get(str(node_id), {})
    return [
        _described(
            name,
            BROKER_KEYS[name],
            _broker_layers(image, config, name, node_id=node_id, raw_defaults=True),
            read_only=BROKER_KEYS[name].read_only,
        )
        for name in names
        if BROKER_KEYS[name].described_unset
        or config.is_set(name)
        or name in own
        or name in defaults
    ]


def describe_client_metrics(
    image: MetadataImage, subscription: str, *, keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every config of a subscription, as Kafka 4.1 reports them: those set on it
    (CLIENT_METRICS_CONFIG), the others at their defaults (DEFAULT_CONFIG, no synonyms), for
    any name: a subscription exists only through its configs."""
    if not subscription:
        raise KafkaError(
            ErrorCode.invalid_request, "Client metrics subscription name must not be empty"
        )
    configs = image.client_metrics.get(subscription, {})
    described = []
    for name, key in sorted(client_metrics.KEYS.items()):
        if keys is not None and name not in keys:
            continue
        if name in configs:
            synonym = ConfigSynonym(
                name=name, value=configs[name], source=ConfigSource.CLIENT_METRICS_CONFIG
            )
            described.append(_described(name, key, [synonym], read_only=False))
        else:
            default = format_value(key, parse_value(key, key.default))
            described.append(replace(_described(name, key, [], read_only=False), value=default))
    return described


def describe_group_configs(
    image: MetadataImage,
    config: BrokerConfig,
    group_id: str,
    *,
    keys: Collection[str] | None = None,
) -> list[DescribedConfig]:
    """A group's configs: those set on it (GROUP_CONFIG), the others at the value the broker
    gives every group (its group.share.* property, else the key's default), for any group id:
    a group's configs may be set before it exists."""
    if not group_id:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    configs = image.group_configs.get(group_id, {})
    described = []
    for name, key in sorted(GROUP_KEYS.items()):
        if keys is not None and name not in keys:
            continue
        if name in configs:
            synonym = ConfigSynonym(
                name=name, value=configs[name], source=ConfigSource.GROUP_CONFIG
            )
            described.append(_described(name, key, [synonym], read_only=False))
            continue
        broker_name = BROKER_DEFAULTS.get(name)
        default = config.get(broker_name) if broker_name is not None else key.default
        described.append(replace(_described(name, key, [], read_only=False), value=str(default)))
    return described


def _broker_layers(
    image: MetadataImage,
    config: BrokerConfig,
    name: str,
    *,
    node_id: int,
    raw_defaults: bool = False,
) -> list[ConfigSynonym]:
    """The broker-level layers of `name`, highest first. With `raw_defaults`, a property with no
    default of its own (log.retention.ms, derived from log.retention.hours) reports null, as
    Kafka does; topic configs need the derived value instead."""
    key = BROKER_KEYS[name]
    layers: list[ConfigSynonym] = []
    node_value = image.broker_configs.get(str(node_id), {}).get(name)
    if node_value is not None:
        layers.append(
            ConfigSynonym(
                name=name,
                value=_normalized(key, node_value),
                source=ConfigSource.DYNAMIC_BROKER_CONFIG,
            )
        )
    default_value = image.broker_configs.get("", {}).get(name)
    if default_value is not None:
        layers.append(
            ConfigSynonym(
                name=name,
                value=_normalized(key, default_value),
                source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            )
        )
    entry = config.entry(name)
    if entry.source is ConfigSource.STATIC_BROKER_CONFIG:
        layers.append(ConfigSynonym(name=name, value=entry.text, source=entry.source))
    elif entry.source is ConfigSource.DEFAULT_CONFIG:
        value = None if raw_defaults and key.default is None else entry.text
        layers.append(ConfigSynonym(name=name, value=value, source=entry.source))
        return layers
    elif not layers:
        # Dynamic in the node's config but not (or no longer) in the image: what the node uses.
        layers.append(ConfigSynonym(name=name, value=entry.text, source=entry.source))
    if key.default is not None:
        # Kafka lists the default under the layers that override it.
        default = format_value(key, parse_value(key, key.default))
        layers.append(ConfigSynonym(name=name, value=default, source=ConfigSource.DEFAULT_CONFIG))
    return layers


def _described(
    name: str, key: ConfigKey, synonyms: list[ConfigSynonym], *, read_only: bool
) -> DescribedConfig:
    sensitive = key.sensitive or key.type is ConfigType.PASSWORD
    if sensitive:
        synonyms = [ConfigSynonym(name=s.name, value=None, source=s.source) for s in synonyms]
    top = (
        synonyms[0]
        if synonyms
        else ConfigSynonym(name=name, value=None, source=ConfigSource.DEFAULT_CONFIG)
    )
    return DescribedConfig(
        name=name,
        value=None if sensitive else top.value,
        source=top.source,
        read_only=read_only,
        is_sensitive=sensitive,
        config_type=CONFIG_TYPE_CODES.get(key.type, 0),
        documentation=key.doc or None,
        synonyms=tuple(synonyms),
    )


def _normalized(key: ConfigKey, raw: str) -> str | None:
    """The value as Kafka would print it (`true`, `delete,compact`), or the raw text."""
    try:
        parsed: Any = parse_value(key, raw)
    except ConfigError:
        return raw
    return format_value(key, parsed)
