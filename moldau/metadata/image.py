"""The immutable cluster metadata image, as Kafka's `MetadataImage` (KIP-631, KIP-866 loader).

An image is what every broker and the controller read: topics with their partitions and
configs, registered brokers and controllers, dynamic broker configs, finalized features, client
quotas, users' SCRAM credentials, ACLs and the producer-id counter, as of metadata log offset
`offset`. It never changes; replaying records into a `MetadataDelta` (`moldau.metadata.delta`)
and calling `delta.apply()` gives the next one. Readers may hold on to an image as a consistent
snapshot across awaits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from moldau.metadata.acls import AclBinding
from moldau.metadata.records import (
    BrokerEndpoint,
    ClientQuotaEntity,
    LeaderRecoveryState,
    PartitionChangeRecord,
)
from moldau.protocol.sasl.scram import ScramCredential
from moldau.types import TopicPartition

_EMPTY: Mapping[str, str] = MappingProxyType({})


NO_LEADER = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionImage:
    """A partition's replica state (Kafka's PartitionRegistration).

    `leader` is NO_LEADER (-1) when no replica may lead (its ISR is fenced, or left, and unclean
    election is off); the ISR then keeps its last member. `leader_epoch` moves with every change
    of leader, `partition_epoch` with every change at all. While a reassignment is in
    progress (KIP-455) `replicas` are the target replicas followed by the ones leaving,
    `adding_replicas` the target's new brokers and `removing_replicas` the leaving ones."""

    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED

    @property
    def preferred_replica(self) -> int:
        """The first of the replicas: the leader the placement intended."""
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def merge(self, record: PartitionChangeRecord) -> PartitionImage:
        """This partition after `record` (Kafka's PartitionRegistration.merge): the partition
        epoch moves on, the leader epoch too when the leader changes."""
        updated = replace(self, partition_epoch=self.partition_epoch + 1)
        if record.leader is not None and record.leader != self.leader:
            updated = replace(updated, leader=record.leader, leader_epoch=self.leader_epoch + 1)
        if record.isr is not None:
            updated = replace(updated, isr=record.isr)
        if record.replicas is not None:
            updated = replace(updated, replicas=record.replicas)
        if record.leader_recovery_state is not None:
            updated = replace(updated, leader_recovery_state=record.leader_recovery_state)
        if record.removing_replicas is not None:
            updated = replace(updated, removing_replicas=record.removing_replicas)
        if record.adding_replicas is not None:
            updated = replace(updated, adding_replicas=record.adding_replicas)
        return updated


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicImage:
    """A topic: its id, its partitions by index, and its own (dynamic) configs."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage]
    configs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def replication_factor(self) -> int:
        """Partition 0's replica count, without the replicas a reassignment is removing (the
        factor it is heading for, which new partitions take)."""
        first = self.partitions.get(0)
        if first is None:
            return 0
        return len(first.replicas) - len(first.removing_replicas)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerImage:
    """A registered broker (Kafka's BrokerRegistration)."""

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    is_controller: bool = False
    in_controlled_shutdown: bool = False

    @property
    def is_active(self) -> bool:
        """Unfenced and not shutting down (Kafka's ClusterControlManager.isActive): may lead a
        partition, join an ISR and be given new replicas."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.name == listener_name:
                return endpoint
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerImage:
    """A registered controller (Kafka's ControllerRegistration, KIP-919): the listeners it
    serves the controller APIs on and the feature levels it supports, by name (min, max)."""

    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    features: Mapping[str, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))
    zk_migration_ready: bool = False

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.name == listener_name:
                return endpoint
        return None


# (user name, mechanism): SCRAM credentials are kept per user and mechanism, as in Kafka.
ScramCredentialKey = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataImage:
    """Everything the cluster knows, as of metadata log offset `offset` (-1: nothing yet)."""

    cluster_id: str
    controller_id: int = -1
    offset: int = -1
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(
        default_factory=lambda: MappingProxyType({})
    )
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: MappingProxyType({}))
    broker_configs: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Client-metrics subscriptions (KIP-714 config resources, type 16): name -> configs.
    client_metrics: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Group configs (KIP-848/KIP-932 config resources, type 32): group id -> configs.
    group_configs: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    next_producer_id: int = 0
    client_quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    controllers: Mapping[int, ControllerImage] = field(default_factory=lambda: MappingProxyType({}))
    scram_credentials: Mapping[ScramCredentialKey, ScramCredential] = field(
        default_factory=lambda: MappingProxyType({})
    )
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def empty(cls, cluster_id: str = "") -> MetadataImage:
        return cls(cluster_id=cluster_id)

    # Lookups used on request paths.

    def partition(self, topic_partition: TopicPartition) -> PartitionImage | None:
        topic = self.topics.get(topic_partition.topic)
        if topic is None:
            return None
        return topic.partitions.get(topic_partition.partition)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        topic = self.topics.get(name)
        return topic.configs if topic is not None else _EMPTY

    def broker_config_overrides(self, node_id: int) -> dict[str, str]:
        """Dynamic broker configs for `node_id`: the cluster default ("") under its own."""
        merged = dict(self.broker_configs.get("", _EMPTY))
        merged.update(self.broker_configs.get(str(node_id), _EMPTY))
        return merged

    def live_brokers(self) -> list[BrokerImage]:
        """Unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def active_brokers(self) -> list[BrokerImage]:
        """Unfenced brokers not in controlled shutdown, by id (`BrokerImage.is_active`)."""
        return [b for _, b in sorted(self.brokers.items()) if b.is_active]

    def is_active_broker(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.is_active

    def iter_partitions(self) -> Iterator[tuple[TopicImage, PartitionImage]]:
        for topic in self.topics.values():
            for partition in topic.partitions.values():
                yield topic, partition
