"""Dynamic config changes for topics, brokers, client-metrics subscriptions and groups, as Kafka's
ConfigurationControlManager (KIP-339).

Each function checks one resource against the current image and returns the `ConfigRecord`s
that carry out the change, or raises `KafkaError`. Topic configs must be known topic configs
with valid values (INVALID_CONFIG); broker configs must be known, dynamically updatable broker
properties. A broker resource is named by its node id, or "" for the cluster-wide default. A
client-metrics resource is a subscription (`moldau.controller.client_metrics`): setting a config
creates it, deleting its last config removes it. A group resource takes the `share.*` group
configs (`moldau.config.share_groups`), checked against the controller's group.share.* bounds;
the group need not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moldau.config.definitions import (
    BROKER_KEYS,
    TOPIC_KEYS,
    TOPIC_SYNONYMS,
    ConfigKey,
    ConfigType,
)
from moldau.config.share_groups import (
    InvalidGroupConfig,
    ShareGroupConfig,
    group_key,
    validate_group_configs,
)
from moldau.config.values import (
    BrokerConfig,
    ConfigError,
    format_value,
    parse_value,
    validate_topic_configs,
)
from moldau.controller import client_metrics
from moldau.controller.operations import AlterableConfig, AlterConfigOp, ConfigResource
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ConfigRecord, ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

_SHARE_GROUP_DEFAULTS = ShareGroupConfig()


def current_configs(image: MetadataImage, resource: ConfigResource) -> Mapping[str, str]:
    """The resource's dynamic configs; raises when the resource does not exist."""
    check_resource(image, resource)
    if resource.resource_type == ConfigResourceType.TOPIC:
        return image.topics[resource.resource_name].configs
    if resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        return image.client_metrics.get(resource.resource_name, {})
    if resource.resource_type == ConfigResourceType.GROUP:
        return image.group_configs.get(resource.resource_name, {})
    return image.broker_configs.get(resource.resource_name, {})


def topic_config_value(
    image: MetadataImage, config: BrokerConfig, topic_name: str, name: str
) -> Any:
    """A topic config as the controller applies it (Kafka's ConfigurationControlManager): the
    topic's own value, else the cluster-wide dynamic default of its broker synonym, else the
    controller's own broker property. Unparsable stored values fall through to the next."""
    key = TOPIC_KEYS[name]
    synonym = TOPIC_SYNONYMS[name]
    for raw, of in (
        (image.topic_configs(topic_name).get(name), key),
        (image.broker_configs.get("", {}).get(synonym), BROKER_KEYS[synonym]),
    ):
        if raw is not None:
            try:
                return parse_value(of, raw)
            except ConfigError:
                continue
    return config.get(synonym)


def check_resource(image: MetadataImage, resource: ConfigResource) -> None:
    if resource.resource_type == ConfigResourceType.TOPIC:
        if resource.resource_name not in image.topics:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"The topic '{resource.resource_name}' does not exist.",
            )
    elif resource.resource_type == ConfigResourceType.BROKER:
        name = resource.resource_name
        if name != "" and not _is_int(name):
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Broker resource name must be a node id or empty, not '{name}'",
            )
    elif resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        client_metrics.check_name(resource.resource_name)
    elif resource.resource_type == ConfigResourceType.GROUP:
        if not resource.resource_name:
            raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    else:
        raise KafkaError(
            ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}"
        )


def alter_configs(
    image: MetadataImage,
    resource: ConfigResource,
    configs: Mapping[str, str | None],
    *,
    share_groups: ShareGroupConfig = _SHARE_GROUP_DEFAULTS,
) -> list[ConfigRecord]:
    """AlterConfigs: the resource's dynamic configs become exactly `configs`."""
    existing = current_configs(image, resource)
    _validate(resource, configs)
    target = {name: value for name, value in configs.items() if value is not None}
    _validate_whole(resource, target, share_groups)
    return _records_for(resource, existing, target)


def incremental_alter_configs(
    image: MetadataImage,
    resource: ConfigResource,
    changes: Sequence[AlterableConfig],
    *,
    share_groups: ShareGroupConfig = _SHARE_GROUP_DEFAULTS,
) -> list[ConfigRecord]:
    """IncrementalAlterConfigs: SET, DELETE, APPEND to or SUBTRACT from list configs."""
    existing = current_configs(image, resource)
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    target = dict(existing)
    for change in changes:
        key = _key_of(resource, change.name)
        if change.op is AlterConfigOp.SET:
            if change.value is None:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Null value not supported for: {change.name}"
                )
            target[change.name] = change.value
        elif change.op is AlterConfigOp.DELETE:
            target.pop(change.name, None)
        elif change.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            if key.type is not ConfigType.LIST:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Can't {change.op.name} to key {change.name} because its type is not LIST.",
                )
            parts = _list_parts(key, target.get(change.name))
            given = [p.strip() for p in (change.value or "").split(",") if p.strip()]
            if change.op is AlterConfigOp.APPEND:
                parts += [p for p in given if p not in parts]
            else:
                parts = [p for p in parts if p not in given]
            target[change.name] = ",".join(parts)
        else:  # pragma: no cover - AlterConfigOp is closed
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation {change.op}")
    changed = {name: target.get(name) for name in names}
    _validate(resource, {k: v for k, v in changed.items() if v is not None})
    _validate_whole(resource, target, share_groups)
    return _records_for(resource, existing, target)


def _list_parts(key: ConfigKey, value: str | None) -> list[str]:
    if value is None:
        default = format_value(key, key.default)
        value = default if default is not None else ""
    return [p.strip() for p in value.split(",") if p.strip()]


def _key_of(resource: ConfigResource, name: str) -> ConfigKey:
    if resource.resource_type == ConfigResourceType.TOPIC:
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        return key
    if resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        return client_metrics.key_of(name)
    if resource.resource_type == ConfigResourceType.GROUP:
        try:
            return group_key(name)
        except InvalidGroupConfig as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
    key = BROKER_KEYS.get(name)
    if key is None:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown broker config name: {name}")
    return key


def _validate(resource: ConfigResource, configs: Mapping[str, str | None]) -> None:
    if resource.resource_type == ConfigResourceType.TOPIC:
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        return
    if resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        for name, value in configs.items():
            if value is None:
                raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for: {name}")
        client_metrics.validate({k: v for k, v in configs.items() if v is not None})
        return
    if resource.resource_type == ConfigResourceType.GROUP:
        for name, value in configs.items():
            _key_of(resource, name)
            if value is None:
                raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for: {name}")
        return  # (values are checked together, with `_validate_whole`)
    for name, value in configs.items():
        key = _key_of(resource, name)
        if key.read_only:
            why = "" if key.applies else f" (it has no effect in Moldau: {key.not_applicable})"
            raise KafkaError(
                ErrorCode.invalid_config, f"Cannot update these configs dynamically: {name}{why}"
            )
        if value is None:
            raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for: {name}")
        try:
            parse_value(key, value)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None


def _validate_whole(
    resource: ConfigResource, target: Mapping[str, str], share_groups: ShareGroupConfig
) -> None:
    """Checks of a resource's configs as a whole, once changed: a group's values against each
    other and the broker's bounds."""
    if resource.resource_type == ConfigResourceType.GROUP:
        try:
            validate_group_configs(target, share_groups)
        except InvalidGroupConfig as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None


def _records_for(
    resource: ConfigResource, existing: Mapping[str, str], target: Mapping[str, str]
) -> list[ConfigRecord]:
    records: list[ConfigRecord] = []
    for name in sorted(set(existing) | set(target)):
        old, new = existing.get(name), target.get(name)
        if old != new:
            records.append(
                ConfigRecord(
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    name=name,
                    value=new,
                )
            )
    return records


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
