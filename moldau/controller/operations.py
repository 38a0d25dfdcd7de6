"""Inputs and results of controller operations, independent of any wire version.

Handlers translate requests into these and results back into responses; the controller core and
`QuorumController` speak only these types. Every result carries Kafka's error code and message.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from moldau.metadata.records import ZERO_UUID, BrokerEndpoint
from moldau.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTopic:
    """A topic to create. -1 partitions/replication factor mean the broker defaults;
    `assignments` (partition -> replica broker ids) replaces both when given."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicResult:
    """`configs` are the topic's own configs as created; the handler adds broker defaults."""

    name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID = ZERO_UUID
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsIncrease:
    """Grow topic `name` to `count` partitions; `assignments` lists replicas of each new one."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResult:
    name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs operation codes (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigResource:
    resource_type: int  # ConfigResourceType
    resource_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    """AlterConfigs: the resource's dynamic configs become exactly `configs` (null = absent)."""

    resource: ConfigResource
    configs: Mapping[str, str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: str
    op: AlterConfigOp
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResource:
    resource: ConfigResource
    configs: Sequence[AlterableConfig]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigResult:
    resource: ConfigResource
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: Sequence[BrokerEndpoint]
    rack: str | None = None
    is_controller: bool = False
    cluster_id: str | None = None  # None: the broker runs inside the controller's own process


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerRegistration:
    """ControllerRegistrationRequest's fields (KIP-919): the controller listeners this process
    serves and the feature levels it supports, by name (min, max)."""

    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: Sequence[BrokerEndpoint]
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    zk_migration_ready: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeat:
    """BrokerHeartbeatRequest's fields (KIP-631)."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationResult:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsBlock:
    """Producer ids `first_producer_id` .. `first_producer_id + size - 1` for one broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


class ElectionType(IntEnum):
    """Kafka's ElectionType codes (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    """The outcome for one partition of a topic (elections, reassignments)."""

    partition: int
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsResult:
    """Per-partition outcomes of one topic, in request order."""

    topic: str
    partitions: Sequence[PartitionResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrMember:
    """A broker a leader proposes for the ISR, with the broker epoch the leader saw it register
    with (-1: not checked). AlterPartition v3's BrokerState (KIP-903)."""

    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrProposal:
    """One partition of an AlterPartition request (KIP-497): the ISR its leader wants, with
    the leader epoch and partition epoch of the state the leader last saw."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[IsrMember]
    leader_recovery_state: int = 0  # LeaderRecoveryState: 1 while recovering (KIP-704)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionResult:
    """The partition's state after the change (or as it stands when nothing changed); only
    `error_code` (and a message for logs) when the change was refused."""

    topic_id: uuid.UUID
    partition: int
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReassignment:
    """Move a partition to `replicas`; None cancels a reassignment in progress (KIP-455)."""

    topic: str
    partition: int
    replicas: Sequence[int] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaOp:
    """Set `key` to `value`, or remove it (KIP-546)."""

    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaAlteration:
    """Quota changes for one entity: (entity type, name) pairs as sent; a None name is the
    default entity of that type."""

    entity: Sequence[tuple[str, str | None]]
    ops: Sequence[ClientQuotaOp]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaResult:
    entity: Sequence[tuple[str, str | None]]
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaFilter:
    """One component of a DescribeClientQuotas filter: match type 0 = exact name, 1 = the
    default entity, 2 = any entity of the type (specified)."""

    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialDeletion:
    """Delete `name`'s credential for `mechanism` (the wire's number: 1 SHA-256, 2 SHA-512)."""

    name: str
    mechanism: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialUpsertion:
    """Set `name`'s credential for `mechanism` from a password salted by the client."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialResult:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
