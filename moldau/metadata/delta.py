"""Changes to a `MetadataImage` accumulated by replaying records, as Kafka's `MetadataDelta`.

    delta = MetadataDelta(image)
    for record in committed_records:
        delta.replay(record)
    new_image = delta.apply()

The delta also tells publishers what changed: created/changed/deleted topics, changed partitions,
changed topic and broker configs, brokers, controllers, features. Deleted topics are keyed by topic id, so a
topic deleted and re-created under the same name in one delta shows up as both.
Replaying a record that does not fit the image (a partition of an unknown topic) raises
`MetadataReplayError`: the log is corrupt or was written by a buggy controller.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from moldau.metadata.acls import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from moldau.metadata.image import (
    BrokerImage,
    ControllerImage,
    MetadataImage,
    PartitionImage,
    ScramCredentialKey,
    TopicImage,
)
from moldau.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaEntity,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
)
from moldau.protocol.sasl.scram import ScramCredential
from moldau.types import TopicPartition


class MetadataReplayError(ValueError):
    """A record that cannot be applied to the image it was replayed on."""


@dataclass(slots=True)
class _TopicChange:
    """A topic being changed in this delta: mutable working copies of its maps."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage]
    configs: dict[str, str]
    created: bool
    changed_partitions: set[int] = field(default_factory=set)
    configs_changed: bool = False

    def image(self) -> TopicImage:
        return TopicImage(
            name=self.name,
            topic_id=self.topic_id,
            partitions=MappingProxyType(dict(sorted(self.partitions.items()))),
            configs=MappingProxyType(dict(self.configs)),
        )


class MetadataDelta:
    """Records replayed on top of `base`; `delta.apply()` builds the next image."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self._topics: dict[uuid.UUID, _TopicChange] = {}
        self._topic_ids_by_name: dict[str, uuid.UUID] = {}
        self._deleted_topics: dict[uuid.UUID, TopicImage] = {}
        self._brokers: dict[int, BrokerImage] = {}
        self._controllers: dict[int, ControllerImage] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._client_metrics: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._features: dict[str, int] = {}
        self._client_quotas: dict[ClientQuotaEntity, dict[str, float]] = {}
        # SCRAM credentials set (an image) or removed (None) in this delta.
        self._scram_credentials: dict[ScramCredentialKey, ScramCredential | None] = {}
        # ACLs created (the binding) or deleted (None) in this delta, by id.
        self._acls: dict[uuid.UUID, AclBinding | None] = {}
        self._next_producer_id: int | None = None
        self._controller_id: int | None = None
        self._offset: int | None = None
        self._cluster_id: str | None = None
        self._replacement: MetadataImage | None = None  # see `diff_images`

    # Replay.

    def replay(self, record: MetadataRecord) -> None:
        match record:
            case TopicRecord():
                self._replay_topic(record)
            case PartitionRecord():
                self._replay_partition(record)
            case PartitionChangeRecord():
                self._replay_partition_change(record)
            case RemoveTopicRecord():
                self._replay_remove_topic(record)
            case ConfigRecord():
                self._replay_config(record)
            case RegisterBrokerRecord():
                self._brokers[record.broker_id] = BrokerImage(
                    broker_id=record.broker_id,
                    incarnation_id=record.incarnation_id,
                    broker_epoch=record.broker_epoch,
                    endpoints=record.endpoints,
                    rack=record.rack,
                    fenced=record.fenced,
                    is_controller=record.is_controller,
                )
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                broker = self._broker(record.broker_id)
                if broker is None or broker.broker_epoch != record.broker_epoch:
                    return  # a stale (un)fence of an older incarnation: Kafka ignores it too
                fenced = isinstance(record, FenceBrokerRecord)
                self._brokers[record.broker_id] = replace(broker, fenced=fenced)
            case BrokerRegistrationChangeRecord():
                broker = self._broker(record.broker_id)
                if broker is None or broker.broker_epoch != record.broker_epoch:
                    return  # (a change of an older incarnation, as for fencing)
                if record.in_controlled_shutdown is not None:
                    self._brokers[record.broker_id] = replace(
                        broker, in_controlled_shutdown=record.in_controlled_shutdown
                    )
            case ProducerIdsRecord():
                self._next_producer_id = record.next_producer_id
            case FeatureLevelRecord():
                self._features[record.name] = record.feature_level
            case ClientQuotaRecord():
                self._replay_client_quota(record)
            case UserScramCredentialRecord():
                self._scram_credentials[(record.name, record.mechanism)] = ScramCredential(
                    salt=record.salt,
                    stored_key=record.stored_key,
                    server_key=record.server_key,
                    iterations=record.iterations,
                )
            case RemoveUserScramCredentialRecord():
                self._scram_credentials[(record.name, record.mechanism)] = None
            case AccessControlEntryRecord():
                self._acls[record.id] = acl_binding(record)
            case RemoveAccessControlEntryRecord():
                self._acls[record.id] = None
            case RegisterControllerRecord():
                self._controllers[record.controller_id] = ControllerImage(
                    controller_id=record.controller_id,
                    incarnation_id=record.incarnation_id,
                    endpoints=record.endpoints,
                    features=MappingProxyType(
                        {name: (low, high) for name, low, high in record.features}
                    ),
                    zk_migration_ready=record.zk_migration_ready,
                )

    def set_offset(self, offset: int) -> None:
        """The metadata log offset of the last record replayed."""
        self._offset = offset

    def set_controller_id(self, controller_id: int) -> None:
        """The active controller changed (a Raft leader change, not a metadata record)."""
        self._controller_id = controller_id

    def set_cluster_id(self, cluster_id: str) -> None:
        self._cluster_id = cluster_id

    def _replay_topic(self, record: TopicRecord) -> None:
        if self._topic_image_or_change(record.topic_id) is not None:
            raise MetadataReplayError(f"topic id {record.topic_id} already exists")
        if self._topic_id(record.name) is not None:
            raise MetadataReplayError(f"topic {record.name!r} already exists")
        self._topics[record.topic_id] = _TopicChange(
            name=record.name, topic_id=record.topic_id, partitions={}, configs={}, created=True
        )
        self._topic_ids_by_name[record.name] = record.topic_id

    def _replay_partition(self, record: PartitionRecord) -> None:
        change = self._change_topic(record.topic_id)
        change.partitions[record.partition] = PartitionImage(
            partition=record.partition,
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            replicas=record.replicas,
            isr=record.isr,
            removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas,
            leader_recovery_state=record.leader_recovery_state,
        )
        change.changed_partitions.add(record.partition)

    def _replay_partition_change(self, record: PartitionChangeRecord) -> None:
        change = self._change_topic(record.topic_id)
        current = change.partitions.get(record.partition)
        if current is None:
            raise MetadataReplayError(
                f"change of unknown partition {record.partition} of topic id {record.topic_id}"
            )
        change.partitions[record.partition] = current.merge(record)
        change.changed_partitions.add(record.partition)

    def _replay_remove_topic(self, record: RemoveTopicRecord) -> None:
        existing = self._topic_image_or_change(record.topic_id)
        if existing is None:
            raise MetadataReplayError(f"removal of unknown topic id {record.topic_id}")
        change = self._topics.pop(record.topic_id, None)
        name = change.name if change is not None else existing.name
        if self._topic_ids_by_name.get(name) == record.topic_id:
            del self._topic_ids_by_name[name]
        base_topic = self.base.topics_by_id.get(record.topic_id)
        if base_topic is not None:
            self._deleted_topics[record.topic_id] = base_topic

    def _replay_config(self, record: ConfigRecord) -> None:
        if record.resource_type == ConfigResourceType.TOPIC:
            topic_id = self._topic_id(record.resource_name)
            if topic_id is None:
                return  # configs of a topic that does not exist have nothing to attach to
            change = self._change_topic(topic_id)
            _set_or_delete(change.configs, record.name, record.value)
            change.configs_changed = True
        elif record.resource_type == ConfigResourceType.BROKER:
            _replay_resource_config(self._broker_configs, self.base.broker_configs, record)
        elif record.resource_type == ConfigResourceType.CLIENT_METRICS:
            _replay_resource_config(self._client_metrics, self.base.client_metrics, record)
        elif record.resource_type == ConfigResourceType.GROUP:
            _replay_resource_config(self._group_configs, self.base.group_configs, record)

    def _replay_client_quota(self, record: ClientQuotaRecord) -> None:
        entity = tuple(sorted(record.entity))
        quotas = self._client_quotas.get(entity)
        if quotas is None:
            quotas = dict(self.base.client_quotas.get(entity, {}))
            self._client_quotas[entity] = quotas
        if record.remove:
            quotas.pop(record.key, None)
        else:
            quotas[record.key] = record.value

    # Lookups across base and delta.

    def _topic_id(self, name: str) -> uuid.UUID | None:
        topic_id = self._topic_ids_by_name.get(name)
        if topic_id is not None:
            return topic_id
        base_topic = self.base.topics.get(name)
        if base_topic is None or base_topic.topic_id in self._deleted_topics:
            return None
        return base_topic.topic_id

    def _topic_image_or_change(self, topic_id: uuid.UUID) -> TopicImage | _TopicChange | None:
        change = self._topics.get(topic_id)
        if change is not None:
            return change
        if topic_id in self._deleted_topics:
            return None
        return self.base.topics_by_id.get(topic_id)

    def _change_topic(self, topic_id: uuid.UUID) -> _TopicChange:
        change = self._topics.get(topic_id)
        if change is not None:
            return change
        base_topic = (
            None if topic_id in self._deleted_topics else self.base.topics_by_id.get(topic_id)
        )
        if base_topic is None:
            raise MetadataReplayError(f"record for unknown topic id {topic_id}")
        change = _TopicChange(
            name=base_topic.name,
            topic_id=topic_id,
            partitions=dict(base_topic.partitions),
            configs=dict(base_topic.configs),
            created=False,
        )
        self._topics[topic_id] = change
        self._topic_ids_by_name[base_topic.name] = topic_id
        return change

    def _broker(self, broker_id: int) -> BrokerImage | None:
        return self._brokers.get(broker_id) or self.base.brokers.get(broker_id)

    # What changed, for publishers.

    @property
    def is_empty(self) -> bool:
        return not (
            self._topics
            or self._deleted_topics
            or self._brokers
            or self._controllers
            or self._broker_configs
            or self._client_metrics
            or self._group_configs
            or self._features
            or self._client_quotas
            or self._scram_credentials
            or self._acls
            or self._next_producer_id is not None
            or self._controller_id is not None
        )

    def created_topics(self) -> dict[str, TopicImage]:
        """Topics that came into existence in this delta, by name."""
        return {c.name: c.image() for c in self._topics.values() if c.created}

    def changed_topics(self) -> dict[uuid.UUID, TopicImage]:
        """The new image of every topic created or changed (partitions or configs)."""
        return {topic_id: c.image() for topic_id, c in self._topics.items()}

    def deleted_topics(self) -> dict[uuid.UUID, TopicImage]:
        """The last image of every topic of the base image removed in this delta."""
        return dict(self._deleted_topics)

    def changed_partitions(self) -> dict[TopicPartition, PartitionImage]:
        """Partitions created or changed (leader, ISR, replicas), with their new state."""
        result: dict[TopicPartition, PartitionImage] = {}
        for change in self._topics.values():
            for index in sorted(change.changed_partitions):
                result[TopicPartition(change.name, index)] = change.partitions[index]
        return result

    def changed_topic_configs(self) -> dict[str, Mapping[str, str]]:
        """Topics (not newly created) whose configs changed, with their new configs."""
        return {
            c.name: MappingProxyType(dict(c.configs))
            for c in self._topics.values()
            if c.configs_changed and not c.created
        }

    def changed_broker_configs(self) -> set[str]:
        """Broker config resources ("" default or a node id) that changed."""
        return set(self._broker_configs)

    def changed_client_metrics(self) -> set[str]:
        """Client-metrics subscriptions created, changed or removed."""
        return set(self._client_metrics)

    def changed_group_configs(self) -> set[str]:
        """Groups whose configs were set, changed or removed."""
        return set(self._group_configs)

    def changed_brokers(self) -> dict[int, BrokerImage]:
        return dict(self._brokers)

    def changed_controllers(self) -> dict[int, ControllerImage]:
        """Controllers registered (again) in this delta, with their new registration."""
        return dict(self._controllers)

    def changed_features(self) -> dict[str, int]:
        """Feature levels finalized in this delta."""
        return dict(self._features)

    def changed_client_quotas(self) -> set[ClientQuotaEntity]:
        return set(self._client_quotas)

    @property
    def acls_changed(self) -> bool:
        return bool(self._acls)

    def changed_scram_credentials(self) -> set[ScramCredentialKey]:
        """(user, mechanism) of the SCRAM credentials set or removed in this delta."""
        return set(self._scram_credentials)

    @property
    def controller_id(self) -> int | None:
        return self._controller_id

    # Building the next image.

    def apply(self) -> MetadataImage:
        if self._replacement is not None:
            return self._replacement
        base = self.base
        topics_by_id = dict(base.topics_by_id)
        for topic_id in self._deleted_topics:
            topics_by_id.pop(topic_id, None)
        for topic_id, change in self._topics.items():
            topics_by_id[topic_id] = change.image()
        if self._topics or self._deleted_topics:
            topics: Mapping[str, TopicImage] = MappingProxyType(
                {t.name: t for t in topics_by_id.values()}
            )
            topics_by_id_view: Mapping[uuid.UUID, TopicImage] = MappingProxyType(topics_by_id)
        else:
            topics, topics_by_id_view = base.topics, base.topics_by_id
        brokers = base.brokers
        if self._brokers:
            brokers = MappingProxyType({**base.brokers, **self._brokers})
        controllers = base.controllers
        if self._controllers:
            controllers = MappingProxyType({**base.controllers, **self._controllers})
        broker_configs = _merged_configs(base.broker_configs, self._broker_configs)
        client_metrics = _merged_configs(base.client_metrics, self._client_metrics)
        group_configs = _merged_configs(base.group_configs, self._group_configs)
        features = base.features
        if self._features:
            features = MappingProxyType({**base.features, **self._features})
        client_quotas = base.client_quotas
        if self._client_quotas:
            merged_quotas = dict(base.client_quotas)
            for entity, quotas in self._client_quotas.items():
                if quotas:
                    merged_quotas[entity] = MappingProxyType(dict(quotas))
                else:
                    merged_quotas.pop(entity, None)
            client_quotas = MappingProxyType(merged_quotas)
        scram_credentials = base.scram_credentials
        if self._scram_credentials:
            merged_scram = dict(base.scram_credentials)
            for key, credential in self._scram_credentials.items():
                if credential is None:
                    merged_scram.pop(key, None)
                else:
                    merged_scram[key] = credential
            scram_credentials = MappingProxyType(merged_scram)
        acls = base.acls
        if self._acls:
            merged_acls = dict(base.acls)
            for acl_id, binding in self._acls.items():
                if binding is None:
                    merged_acls.pop(acl_id, None)
                else:
                    merged_acls[acl_id] = binding
            acls = MappingProxyType(merged_acls)
        return MetadataImage(
            cluster_id=self._cluster_id if self._cluster_id is not None else base.cluster_id,
            controller_id=(
                self._controller_id if self._controller_id is not None else base.controller_id
            ),
            offset=self._offset if self._offset is not None else base.offset,
            topics=topics,
            topics_by_id=topics_by_id_view,
            brokers=brokers,
            controllers=controllers,
            broker_configs=broker_configs,
            client_metrics=client_metrics,
            group_configs=group_configs,
            features=features,
            client_quotas=client_quotas,
            scram_credentials=scram_credentials,
            acls=acls,
            next_producer_id=(
                self._next_producer_id
                if self._next_producer_id is not None
                else base.next_producer_id
            ),
        )


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        resource_type=ResourceType(record.resource_type),
        resource_name=record.resource_name,
        pattern_type=PatternType(record.pattern_type),
        principal=record.principal,
        host=record.host,
        operation=AclOperation(record.operation),
        permission=AclPermission(record.permission_type),
    )


def _merged_configs(
    base: Mapping[str, Mapping[str, str]], changes: Mapping[str, Mapping[str, str]]
) -> Mapping[str, Mapping[str, str]]:
    """`base` with each changed resource's configs replaced (an emptied resource is gone)."""
    if not changes:
        return base
    merged = dict(base)
    for name, configs in changes.items():
        if configs:
            merged[name] = MappingProxyType(dict(configs))
        else:
            merged.pop(name, None)
    return MappingProxyType(merged)


def _replay_resource_config(
    changes: dict[str, dict[str, str]],
    base: Mapping[str, Mapping[str, str]],
    record: ConfigRecord,
) -> None:
    """A config of a resource kept by name (a broker, a client-metrics subscription): its
    configs in this delta start as the base image's."""
    configs = changes.get(record.resource_name)
    if configs is None:
        configs = dict(base.get(record.resource_name, {}))
        changes[record.resource_name] = configs
    _set_or_delete(configs, record.name, record.value)


def _set_or_delete(configs: dict[str, str], name: str, value: str | None) -> None:
    if value is None:
        configs.pop(name, None)
    else:
        configs[name] = value


def diff_from_empty(image: MetadataImage) -> MetadataDelta:
    """A delta that takes an empty image to `image`: how a late publisher catches up."""
    delta = MetadataDelta(MetadataImage.empty(image.cluster_id))
    for topic in image.topics_by_id.values():
        delta._topics[topic.topic_id] = _TopicChange(
            name=topic.name,
            topic_id=topic.topic_id,
            partitions=dict(topic.partitions),
            configs=dict(topic.configs),
            created=True,
            changed_partitions=set(topic.partitions),
        )
        delta._topic_ids_by_name[topic.name] = topic.topic_id
    delta._brokers.update(image.brokers)
    delta._controllers.update(image.controllers)
    delta._broker_configs.update({k: dict(v) for k, v in image.broker_configs.items()})
    delta._client_metrics.update({k: dict(v) for k, v in image.client_metrics.items()})
    delta._group_configs.update({k: dict(v) for k, v in image.group_configs.items()})
    delta._features.update(image.features)
    delta._client_quotas.update({k: dict(v) for k, v in image.client_quotas.items()})
    delta._scram_credentials.update(image.scram_credentials)
    delta._acls.update(image.acls)
    delta._next_producer_id = image.next_producer_id
    delta._controller_id = image.controller_id
    delta._offset = image.offset
    return delta


def diff_images(before: MetadataImage, after: MetadataImage) -> MetadataDelta:
    """A delta from `before` to `after`, an image loaded whole (a snapshot installed in its
    place): it reports what differs as replayed records would, and `delta.apply()` is
    `after` itself (brokers and topics gone from `after` are gone, which no record does).
    Replay nothing into it."""
    delta = MetadataDelta(before)
    delta._replacement = after
    for topic_id, topic in after.topics_by_id.items():
        old = before.topics_by_id.get(topic_id)
        if old == topic:
            continue
        old_partitions = old.partitions if old is not None else {}
        delta._topics[topic_id] = _TopicChange(
            name=topic.name,
            topic_id=topic_id,
            partitions=dict(topic.partitions),
            configs=dict(topic.configs),
            created=old is None,
            changed_partitions={
                index for index, p in topic.partitions.items() if old_partitions.get(index) != p
            },
            configs_changed=old is not None and old.configs != topic.configs,
        )
        delta._topic_ids_by_name[topic.name] = topic_id
    for topic_id, old in before.topics_by_id.items():
        if topic_id not in after.topics_by_id:
            delta._deleted_topics[topic_id] = old
    delta._brokers.update(
        (broker_id, broker)
        for broker_id, broker in after.brokers.items()
        if before.brokers.get(broker_id) != broker
    )
    delta._controllers.update(
        (controller_id, controller)
        for controller_id, controller in after.controllers.items()
        if before.controllers.get(controller_id) != controller
    )
    for name in set(before.broker_configs) | set(after.broker_configs):
        if before.broker_configs.get(name) != after.broker_configs.get(name):
            delta._broker_configs[name] = dict(after.broker_configs.get(name, {}))
    for name in set(before.client_metrics) | set(after.client_metrics):
        if before.client_metrics.get(name) != after.client_metrics.get(name):
            delta._client_metrics[name] = dict(after.client_metrics.get(name, {}))
    for name in set(before.group_configs) | set(after.group_configs):
        if before.group_configs.get(name) != after.group_configs.get(name):
            delta._group_configs[name] = dict(after.group_configs.get(name, {}))
    delta._features.update(
        (name, level)
        for name, level in after.features.items()
        if before.features.get(name) != level
    )
    for entity in set(before.client_quotas) | set(after.client_quotas):
        if before.client_quotas.get(entity) != after.client_quotas.get(entity):
            delta._client_quotas[entity] = dict(after.client_quotas.get(entity, {}))
    for key in set(before.scram_credentials) | set(after.scram_credentials):
        if before.scram_credentials.get(key) != after.scram_credentials.get(key):
            delta._scram_credentials[key] = after.scram_credentials.get(key)
    for acl_id in set(before.acls) | set(after.acls):
        if before.acls.get(acl_id) != after.acls.get(acl_id):
            delta._acls[acl_id] = after.acls.get(acl_id)
    if before.next_producer_id != after.next_producer_id:
        delta._next_producer_id = after.next_producer_id
    if before.controller_id != after.controller_id:
        delta._controller_id = after.controller_id
    delta._offset = after.offset
    return delta
