"""The records of the cluster metadata log, mirroring Kafka's metadata record types (KIP-631).

Each record is a frozen dataclass with a stable `RECORD_TYPE` (Kafka's metadata record api key
where one exists) and a `VERSION`. Replaying them in log order rebuilds the whole cluster state
(`moldau.metadata.delta`). Serialization lives in `moldau.metadata.serde`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from moldau.metadata.acls import AclBinding
from moldau.protocol.sasl.scram import ScramCredential

# A Kafka Uuid with all bits zero means "no topic id".
ZERO_UUID = uuid.UUID(int=0)


class LeaderRecoveryState(IntEnum):
    """Whether a partition's leader came from an unclean election and has not yet told the
    controller it recovered (Kafka's LeaderRecoveryState, KIP-704)."""

    RECOVERED = 0
    RECOVERING = 1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes, as used on the wire by DescribeConfigs and friends."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """A topic came into existence (Kafka's TopicRecord, api key 2)."""

    RECORD_TYPE: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0

    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """A partition and its full replica state (Kafka's PartitionRecord, api key 3).

    Version 1 adds `leader_recovery_state` (a LeaderRecoveryState value)."""

    RECORD_TYPE: ClassVar[int] = 3
    VERSION: ClassVar[int] = 1

    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord:
    """A change to a partition's leader, ISR or replicas (Kafka's PartitionChangeRecord, key 5).

    Fields left as None are unchanged; `leader` -1 means no leader. Replaying a change bumps
    `partition_epoch`; a change of leader also bumps `leader_epoch`, as in Kafka. Version 1 adds
    `leader_recovery_state`; version 2 `removing_replicas` and `adding_replicas` (a reassignment
    in progress, KIP-455: empty tuples when it ends).
    """

    RECORD_TYPE: ClassVar[int] = 5
    VERSION: ClassVar[int] = 2

    topic_id: uuid.UUID
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    leader_recovery_state: int | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord:
    """A topic and all its partitions and configs are gone (Kafka's RemoveTopicRecord, key 9)."""

    RECORD_TYPE: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0

    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    """A dynamic config was set, or deleted when `value` is None (Kafka's ConfigRecord, key 4).

    `resource_name` is the topic name for topics; for brokers it is the node id as a string, or
    "" for the cluster-wide default.
    """

    RECORD_TYPE: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0

    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    """One advertised listener of a broker."""

    name: str
    host: str
    port: int
    security_protocol: int = 0  # Kafka's SecurityProtocol id: 0 = PLAINTEXT


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    """A broker (re)registered: a new incarnation with a new broker epoch (Kafka's key 0)."""

    RECORD_TYPE: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True
    is_controller: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord:
    """A broker may no longer lead or be in an ISR (Kafka's FenceBrokerRecord, key 7)."""

    RECORD_TYPE: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord:
    """A registered broker caught up and may serve again (Kafka's UnfenceBrokerRecord, key 8)."""

    RECORD_TYPE: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord:
    """A registered broker entered controlled shutdown (Kafka's BrokerRegistrationChangeRecord,
    key 17, of which Moldau uses only `in_controlled_shutdown`: fencing has its own records).
    A new registration of the broker starts outside controlled shutdown again."""

    RECORD_TYPE: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord:
    """A block of producer ids went to a broker; `next_producer_id` is the first id not yet
    handed out (Kafka's ProducerIdsRecord, key 15)."""

    RECORD_TYPE: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord:
    """The finalized level of a feature such as `metadata.version` (Kafka's key 12)."""

    RECORD_TYPE: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0

    name: str
    feature_level: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterControllerRecord:
    """A controller (re)registered its listeners and supported features (Kafka's
    RegisterControllerRecord, key 27, KIP-919; written from metadata.version 3.7-IV0). The
    latest record of a controller id replaces the one before: a new incarnation is a restart.
    `features` are (name, min supported level, max supported level)."""

    RECORD_TYPE: ClassVar[int] = 27
    VERSION: ClassVar[int] = 0

    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    features: tuple[tuple[str, int, int], ...] = ()
    zk_migration_ready: bool = False


# A client quota entity: (entity type, entity name) pairs sorted by type; a None name is the
# default entity of that type. Types are "user", "client-id" and "ip".
ClientQuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord:
    """A client quota was set, or removed when `remove` (Kafka's ClientQuotaRecord, key 14)."""

    RECORD_TYPE: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0

    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism was set (Kafka's UserScramCredentialRecord,
    key 11, KIP-554): what the server keeps of a password, never the password."""

    RECORD_TYPE: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0

    name: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def of(
        cls, name: str, mechanism: str, credential: ScramCredential
    ) -> UserScramCredentialRecord:
        return cls(
            name=name,
            mechanism=mechanism,
            salt=credential.salt,
            stored_key=credential.stored_key,
            server_key=credential.server_key,
            iterations=credential.iterations,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism was deleted (Kafka's key 22)."""

    RECORD_TYPE: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0

    name: str
    mechanism: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord:
    """An ACL was created (Kafka's AccessControlEntryRecord, key 23); the codes are Kafka's
    (`moldau.metadata.acls`)."""

    RECORD_TYPE: ClassVar[int] = 23
    VERSION: ClassVar[int] = 0

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord:
    """An ACL was deleted (Kafka's RemoveAccessControlEntryRecord, key 24)."""

    RECORD_TYPE: ClassVar[int] = 24
    VERSION: ClassVar[int] = 0

    id: uuid.UUID


def acl_record(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=int(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=int(binding.operation),
        permission_type=int(binding.permission),
    )


MetadataRecord = (
    TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | RegisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
    | ProducerIdsRecord
    | FeatureLevelRecord
    | ClientQuotaRecord
    | RegisterControllerRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

RECORD_CLASSES: dict[int, type[MetadataRecord]] = {
    cls.RECORD_TYPE: cls
    for cls in (
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        RegisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        BrokerRegistrationChangeRecord,
        ProducerIdsRecord,
        FeatureLevelRecord,
        ClientQuotaRecord,
        RegisterControllerRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
    )
}
