"""`AdminClient`: topics, partitions and their reassignments, configs, records, cluster, ACLs,
log dirs, groups and their offsets.

Mirrors the shape of confluent-kafka's `AdminClient` (and Kafka's `Admin`), but as plain async
methods that return results or raise `KafkaException` naming the resource that failed. Requests go
where Kafka sends them: topic changes and partition reassignments to any broker (it forwards them
to the controller), broker configs, DescribeLogDirs and AlterReplicaLogDirs to that broker,
DeleteRecords and ListOffsets to partition leaders, group requests to the group's coordinator,
and ListGroups to every broker.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from moldau.client import acls, quorum, quotas, scram_users
from moldau.client.acls import AclBinding, AclBindingFilter
from moldau.client.base import ClientBase
from moldau.client.cluster import BrokerInfo, Cluster, ClusterMetadata, TopicInfo
from moldau.client.config import ClientConfig
from moldau.client.consumer_protocol import decode_assignment
from moldau.client.errors import KafkaException, check_error
from moldau.client.group import commit_offsets, fetch_committed_offsets
from moldau.client.log_dirs import (
    LogDirDescription,
    ReplicaInfo,
    ReplicaLogDirInfo,
    TopicPartitionReplica,
    alter_replica_log_dirs,
    describe_log_dirs,
    describe_replica_log_dirs,
)
from moldau.client.offsets import ListOffsetsResult, list_offsets
from moldau.client.quorum import FeatureMetadata, QuorumInfo
from moldau.client.scram_users import ScramDeletion, ScramUpsertion
from moldau.client.sync import SyncFacade
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.types import TopicPartition

__all__ = [
    "AdminClient",
    "AlterConfigOp",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "GroupDescription",
    "GroupListing",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "PartitionReassignment",
    "ReplicaInfo",
    "ReplicaLogDirInfo",
    "ResourceType",
    "SyncAdminClient",
    "TopicPartitionReplica",
]


class ResourceType(enum.IntEnum):
    """A config resource's type (Kafka's ConfigResource.Type codes)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' `config_source`, with Kafka's names."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class NewTopic:
    topic: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigResource:
    restype: ResourceType
    name: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    is_read_only: bool
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    documentation: str | None = None  # asked for with include_documentation

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's `PartitionReassignment`): the replicas as they stand
    (the target first, then the replicas leaving), and which of them join or leave."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas the partition will have once the reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


class AdminClient(ClientBase):
    """Cluster administration over the Kafka protocol; an async context manager."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(config)
        self._timeout_ms = self.config.get_int("request.timeout.ms")

    # --- topics ------------------------------------------------------------------------------

    async def list_topics(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Brokers, controller and topics (all of them unless `topics` is given)."""
        return await self.cluster.refresh_metadata(None if topics is None else list(topics))

    async def describe_topic(self, name: str) -> TopicInfo:
        return await self.cluster.topic(name)

    async def create_topics(
        self, new_topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, int]:
        """Create topics; returns the partition count of each (as the broker reports it)."""
        response = await self.cluster.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": t.topic,
                        "num_partitions": t.num_partitions,
                        "replication_factor": t.replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": str(v)} for k, v in t.config.items()],
                    }
                    for t in new_topics
                ],
                "timeout": self._timeout_ms,
                "validate_only": validate_only,
            },
        )
        counts = {}
        for topic in response.topics:
            check_error(topic.error_code, topic.error_message, context=f"topic '{topic.name}'")
            counts[topic.name] = int(getattr(topic, "num_partitions", -1))
        return counts

    async def delete_topics(self, names: Sequence[str]) -> None:
        response = await self.cluster.request(
            ApiKey.DELETE_TOPICS,
            {
                "topics": [{"name": n} for n in names],
                "topic_names": list(names),
                "timeout": self._timeout_ms,
            },
        )
        for topic in response.responses:
            check_error(
                topic.error_code,
                getattr(topic, "error_message", None),
                context=f"topic '{topic.name}'",
            )

    async def create_partitions(self, new_counts: Mapping[str, int]) -> None:
        """Grow each topic to the given total partition count."""
        response = await self.cluster.request(
            ApiKey.CREATE_PARTITIONS,
            {
                "topics": [
                    {"name": n, "count": c, "assignments": None} for n, c in new_counts.items()
                ],
                "timeout": self._timeout_ms,
                "validate_only": False,
            },
        )
        for result in response.results:
            check_error(result.error_code, result.error_message, context=f"topic '{result.name}'")

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, KafkaException | None]:
        """Start (a target replica list) or cancel (None) reassignments (KIP-455). Returns each
        partition's outcome: None when started or cancelled, else the broker's error (unknown
        partition, invalid assignment, no reassignment in progress, ...). A success means
        started, not finished: `list_partition_reassignments` shows what is still moving."""
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, replicas in reassignments.items():
            topics[tp.topic].append(
                {
                    "partition_index": tp.partition,
                    "replicas": None if replicas is None else [int(r) for r in replicas],
                }
            )
        response = await self.cluster.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            {
                "timeout": self._timeout_ms,
                "allow_replication_factor_change": allow_replication_factor_change,
                "topics": [{"name": n, "partitions": p} for n, p in topics.items()],
            },
        )
        check_error(
            response.error_code,
            getattr(response, "error_message", None),
            context="AlterPartitionReassignments",
        )
        results: dict[TopicPartition, KafkaException | None] = {}
        for topic in response.responses:
            for partition in topic.partitions:
                tp = TopicPartition(topic.name, int(partition.partition_index))
                try:
                    check_error(partition.error_code, partition.error_message, context=str(tp))
                except KafkaException as exc:
                    results[tp] = exc
                else:
                    results[tp] = None
        return results

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress, of every partition or of the ones named (a partition
        that is not reassigning, or does not exist, is left out, as Kafka does)."""
        topics: dict[str, list[int]] | None = None
        if partitions is not None:
            topics = defaultdict(list)
            for tp in partitions:
                topics[tp.topic].append(tp.partition)
        response = await self.cluster.request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            {
                "timeout": self._timeout_ms,
                "topics": None
                if topics is None
                else [{"name": n, "partition_indexes": p} for n, p in topics.items()],
            },
        )
        check_error(
            response.error_code,
            getattr(response, "error_message", None),
            context="ListPartitionReassignments",
        )
        ongoing = {}
        for topic in response.topics:
            for partition in topic.partitions:
                ongoing[TopicPartition(topic.name, int(partition.partition_index))] = (
                    PartitionReassignment(
                        replicas=tuple(int(r) for r in partition.replicas),
                        adding_replicas=tuple(int(r) for r in partition.adding_replicas),
                        removing_replicas=tuple(int(r) for r in partition.removing_replicas),
                    )
                )
        return dict(sorted(ongoing.items()))

    # --- configs -----------------------------------------------------------------------------

    async def _config_connection(self, resource: ConfigResource) -> Any:
        return await _config_connection(self.cluster, resource)

    async def describe_configs(
        self,
        resource: ConfigResource,
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[str, ConfigEntry]:
        return await describe_configs(
            self.cluster,
            resource,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )

    async def alter_configs(self, resource: ConfigResource, configs: Mapping[str, str]) -> None:
        """Replace the resource's whole dynamic config (Kafka's legacy AlterConfigs)."""
        connection = await self._config_connection(resource)
        response = await connection.request(
            ApiKey.ALTER_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": int(resource.restype),
                        "resource_name": resource.name,
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "validate_only": False,
            },
        )
        for result in response.responses:
            check_error(result.error_code, result.error_message, context=_describe(resource))

    async def incremental_alter_configs(
        self,
        resource: ConfigResource,
        operations: Sequence[tuple[str, AlterConfigOp, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Apply (name, SET|DELETE|APPEND|SUBTRACT, value) operations to one resource."""
        connection = await self._config_connection(resource)
        response = await connection.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": int(resource.restype),
                        "resource_name": resource.name,
                        "configs": [
                            {"name": name, "config_operation": int(op), "value": value}
                            for name, op, value in operations
                        ],
                    }
                ],
                "validate_only": validate_only,
            },
        )
        for result in response.responses:
            check_error(result.error_code, result.error_message, context=_describe(resource))

    async def list_config_resources(
        self, types: Iterable[ResourceType] = ()
    ) -> list[ConfigResource]:
        """The config resources of the given types (all types when empty) that DescribeConfigs
        can be asked about: ListConfigResources v1 (KIP-1142), v0 (client metrics only) on an
        older broker."""
        asked = [int(t) for t in types]
        connection = await self.cluster.any_connection()
        if connection.versions.pick(ApiKey.LIST_CONFIG_RESOURCES) >= 1:
            body: dict[str, Any] = {"resource_types": asked}
        elif asked and set(asked) != {ResourceType.CLIENT_METRICS}:
            raise KafkaException(
                ErrorCode.unsupported_version,
                "the broker lists client-metrics resources only (ListConfigResources v0)",
            )
        else:
            body = {}
        response = await connection.request(ApiKey.LIST_CONFIG_RESOURCES, body)
        check_error(response.error_code, None, context="listing config resources")
        return [
            ConfigResource(
                ResourceType(getattr(r, "resource_type", ResourceType.CLIENT_METRICS)),
                r.resource_name,
            )
            for r in response.config_resources
        ]

    # --- records and offsets -----------------------------------------------------------------

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Move each partition's log start offset to the given offset (-1: the high watermark).
        Returns the new low watermarks."""
        by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, offset in offsets.items():
            connection = await self.cluster.leader_connection(tp.topic, tp.partition)
            by_leader[connection.node_id][tp] = offset
        result: dict[TopicPartition, int] = {}
        for node_id, items in by_leader.items():
            connection = await self.cluster.connection(node_id)
            topics: dict[str, list[dict[str, int]]] = defaultdict(list)
            for tp, offset in items.items():
                topics[tp.topic].append({"partition_index": tp.partition, "offset": offset})
            response = await connection.request(
                ApiKey.DELETE_RECORDS,
                {
                    "topics": [{"name": n, "partitions": p} for n, p in topics.items()],
                    "timeout": self._timeout_ms,
                },
            )
            for topic in response.topics:
                for partition in topic.partitions:
                    tp = TopicPartition(topic.name, int(partition.partition_index))
                    check_error(partition.error_code, context=str(tp))
                    result[tp] = int(partition.low_watermark)
        return result

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, isolation_level: int = 0
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by spec: -2 earliest, -1 latest, -3 max timestamp, else a timestamp in ms."""
        return await list_offsets(self.cluster, specs, isolation_level=isolation_level)

    # --- cluster -----------------------------------------------------------------------------

    async def describe_cluster(self, *, include_fenced_brokers: bool = False) -> ClusterMetadata:
        """Cluster id, controller and brokers; fenced ones too when asked (DescribeCluster v2,
        KIP-1073: Metadata lists only unfenced brokers)."""
        connection = await self.cluster.any_connection()
        if ApiKey.DESCRIBE_CLUSTER not in connection.versions.ranges:
            return await self.cluster.refresh_metadata([])
        response = await connection.request(
            ApiKey.DESCRIBE_CLUSTER,
            {
                "include_cluster_authorized_operations": False,
                "endpoint_type": 1,
                "include_fenced_brokers": include_fenced_brokers,
            },
        )
        check_error(response.error_code, response.error_message, context="DescribeCluster")
        brokers = {
            int(b.broker_id): BrokerInfo(
                int(b.broker_id), b.host, int(b.port), b.rack, bool(getattr(b, "is_fenced", False))
            )
            for b in response.brokers
        }
        return ClusterMetadata(
            response.cluster_id, int(response.controller_id), dict(sorted(brokers.items())), {}
        )

    # --- ACLs --------------------------------------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Create ACLs (CreateAcls); raises KafkaException for the first one refused."""
        await acls.create_acls(self.cluster, bindings)

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs matching the filter (DescribeAcls; `AclBindingFilter()` matches all)."""
        return await acls.describe_acls(self.cluster, acl_filter)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching the filters (DeleteAcls); the ACLs each filter deleted."""
        return await acls.delete_acls(self.cluster, filters)

    # --- users (SCRAM credentials) -----------------------------------------------------------

    async def alter_user_scram_credentials(
        self, alterations: Sequence[ScramUpsertion | ScramDeletion]
    ) -> None:
        """Set or delete users' SCRAM credentials (`ScramUpsertion.from_password(...)`)."""
        await scram_users.alter_user_scram_credentials(self.cluster, alterations)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[tuple[str, int]]]:
        """user -> [(mechanism, iterations)], every user's when `users` is None."""
        return await scram_users.describe_user_scram_credentials(self.cluster, users)

    # --- client quotas (KIP-546) --------------------------------------------------------------

    async def describe_client_quotas(
        self, entity: quotas.ClientQuotaEntity, *, strict: bool = True
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """The quotas of the entities matching `entity` (type -> name, None: the default)."""
        return await quotas.describe_client_quotas(self.cluster, entity, strict=strict)

    async def alter_client_quotas(
        self, alterations: Sequence[quotas.QuotaAlteration], *, validate_only: bool = False
    ) -> None:
        """Set or remove quota keys of entities (AlterClientQuotas)."""
        await quotas.alter_client_quotas(self.cluster, alterations, validate_only=validate_only)

    async def describe_quorum(self) -> QuorumInfo:
        """The metadata quorum: leader, epoch, high watermark, voters and observers with lag."""
        return await quorum.describe_quorum(self.cluster)

    async def describe_features(self) -> FeatureMetadata:
        """Supported and finalized features (from ApiVersions, as Kafka's admin reads them)."""
        return await quorum.describe_features(await self.cluster.any_connection())

    async def update_features(
        self,
        levels: Mapping[str, int],
        *,
        upgrade_type: int = quorum.UPGRADE,
        validate_only: bool = False,
    ) -> None:
        """Finalize feature levels, all or nothing (UpdateFeatures)."""
        await quorum.update_features(
            self.cluster, levels, upgrade_type=upgrade_type, validate_only=validate_only
        )

    # --- log dirs (KIP-113) -------------------------------------------------------------------

    async def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        *,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs and their replicas (DescribeLogDirs, sent to each broker):
        every broker unless `broker_ids` are given, every replica unless `partitions` are."""
        if broker_ids is None:
            broker_ids = list((await self.cluster.refresh_metadata([])).brokers)
        return await describe_log_dirs(self.cluster, broker_ids, partitions)

    async def describe_replica_log_dirs(
        self, replicas: Iterable[TopicPartitionReplica]
    ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """Each replica's log dir, and its future replica's while it moves (DescribeLogDirs of
        those partitions, sent to each replica's broker)."""
        return await describe_replica_log_dirs(self.cluster, replicas)

    async def alter_replica_log_dirs(
        self, assignments: Mapping[TopicPartitionReplica, str]
    ) -> dict[TopicPartitionReplica, KafkaException | None]:
        """Move replicas to other log dirs of their brokers (AlterReplicaLogDirs, sent to each
        broker). Each replica's outcome: None when started, else the broker's error
        (REPLICA_NOT_AVAILABLE: the broker has no replica yet and will create it there)."""
        return await alter_replica_log_dirs(self.cluster, assignments)

    # --- groups ------------------------------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Groups known to any broker (ListGroups goes to every broker, as Kafka's admin does)."""
        await self.cluster.refresh_metadata([])
        listings: dict[str, GroupListing] = {}
        for node_id in self.cluster.metadata.brokers:
            response = await self.cluster.retrying(partial(self._list_groups_on, node_id))
            for group in response.groups:
                listings[group.group_id] = GroupListing(
                    group_id=group.group_id,
                    protocol_type=group.protocol_type,
                    state=getattr(group, "group_state", "") or "",
                    group_type=getattr(group, "group_type", "") or "",
                )
        return [listings[name] for name in sorted(listings)]

    async def _list_groups_on(self, node_id: int) -> Any:
        connection = await self.cluster.connection(node_id)
        response = await connection.request(
            ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []}
        )
        check_error(response.error_code, context=f"ListGroups on broker {node_id}")
        return response

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """Classic and KIP-848 groups alike: DescribeGroups, and ConsumerGroupDescribe for a
        group the coordinator says is not a classic one."""
        descriptions = []
        for group_id in group_ids:
            response = await self.cluster.coordinator_request(
                group_id,
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group_id], "include_authorized_operations": False},
                errors=lambda r: [g.error_code for g in r.groups],
            )
            coordinator = await self.cluster.coordinator(group_id)
            for group in response.groups:
                message = getattr(group, "error_message", None) or ""
                if "not a classic group" in message:
                    descriptions.append(await self._describe_consumer_group(group.group_id))
                    continue
                check_error(group.error_code, context=f"group '{group.group_id}'")
                members = tuple(
                    MemberDescription(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        host=m.client_host,
                        group_instance_id=getattr(m, "group_instance_id", None),
                        assignment=tuple(
                            _safe_assignment(m.member_assignment)
                            if group.protocol_type == "consumer"
                            else ()
                        ),
                    )
                    for m in group.members
                )
                descriptions.append(
                    GroupDescription(
                        group_id=group.group_id,
                        state=group.group_state,
                        protocol_type=group.protocol_type,
                        protocol=group.protocol_data,
                        members=members,
                        coordinator=coordinator.node_id,
                    )
                )
        return descriptions

    async def _describe_consumer_group(self, group_id: str) -> GroupDescription:
        """A KIP-848 (`group.protocol=consumer`) group, with ConsumerGroupDescribe."""
        response = await self.cluster.coordinator_request(
            group_id,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            {"group_ids": [group_id], "include_authorized_operations": False},
            errors=lambda r: [g.error_code for g in r.groups],
        )
        coordinator = await self.cluster.coordinator(group_id)
        [group] = response.groups
        check_error(
            group.error_code, getattr(group, "error_message", None), context=f"group '{group_id}'"
        )
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                group_instance_id=m.instance_id,
                assignment=tuple(
                    TopicPartition(t.topic_name, int(p))
                    for t in m.assignment.topic_partitions
                    for p in t.partitions
                ),
            )
            for m in group.members
        )
        return GroupDescription(
            group_id=group.group_id,
            state=_KIP_848_STATES.get(group.group_state, group.group_state),
            protocol_type="consumer",
            protocol=group.assignor_name,
            members=members,
            coordinator=coordinator.node_id,
        )

    async def delete_groups(self, group_ids: Sequence[str]) -> None:
        for group_id in group_ids:
            response = await self.cluster.coordinator_request(
                group_id,
                ApiKey.DELETE_GROUPS,
                {"groups_names": [group_id]},
                errors=lambda r: [g.error_code for g in r.results],
            )
            for result in response.results:
                check_error(result.error_code, context=f"group '{result.group_id}'")

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of a group (-1 where nothing is committed)."""
        return await fetch_committed_offsets(self.cluster, group_id, partitions)

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Commit offsets for a group that has no active members (as Kafka's admin does)."""
        await commit_offsets(self.cluster, group_id, offsets)


# ConsumerGroupDescribe names states in lower case; the tools print them as DescribeGroups does.
_KIP_848_STATES: Final = {
    "empty": "Empty",
    "assigning": "Assigning",
    "reconciling": "Reconciling",
    "stable": "Stable",
    "dead": "Dead",
}


def _describe(resource: ConfigResource) -> str:
    return f"{resource.restype.name.lower()} '{resource.name}'"


def _enum(cls: type[Any], value: Any) -> Any:
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def _config_source(entry: Any) -> ConfigSource:
    source = getattr(entry, "config_source", None)
    if source is not None:
        return ConfigSource(_enum(ConfigSource, source))
    return (
        ConfigSource.DEFAULT_CONFIG if getattr(entry, "is_default", False) else ConfigSource.UNKNOWN
    )


def _safe_assignment(data: bytes | None) -> list[TopicPartition]:
    try:
        return decode_assignment(data)
    except Exception:
        return []


class SyncAdminClient(SyncFacade[AdminClient]):
    """`AdminClient` for synchronous code: every coroutine method becomes a blocking call."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        super().__init__(lambda: AdminClient(config))


async def _config_connection(cluster: Cluster, resource: ConfigResource) -> Any:
    if resource.restype in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and resource.name:
        return await cluster.connection(int(resource.name))
    return await cluster.any_connection()


async def describe_configs(
    cluster: Cluster,
    resource: ConfigResource,
    *,
    keys: Sequence[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> dict[str, ConfigEntry]:
    """DescribeConfigs of one resource (all its configs, or those named in `keys`), for any
    client's cluster: `AdminClient.describe_configs`, and the Spark sink's look at a topic's
    `compression.type`."""
    connection = await _config_connection(cluster, resource)
    response = await connection.request(
        ApiKey.DESCRIBE_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": int(resource.restype),
                    "resource_name": resource.name,
                    "configuration_keys": None if keys is None else list(keys),
                }
            ],
            "include_synonyms": include_synonyms,
            "include_documentation": include_documentation,
        },
    )
    result = response.results[0]
    check_error(result.error_code, result.error_message, context=_describe(resource))
    entries = {}
    for entry in result.configs:
        source = _config_source(entry)
        entries[entry.name] = ConfigEntry(
            name=entry.name,
            value=entry.value,
            source=source,
            is_read_only=bool(entry.read_only),
            is_sensitive=bool(entry.is_sensitive),
            synonyms=tuple(
                (s.name, s.value, _enum(ConfigSource, s.source))
                for s in getattr(entry, "synonyms", ())
            ),
            documentation=getattr(entry, "documentation", None),
        )
    return dict(sorted(entries.items()))
