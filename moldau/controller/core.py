"""Controller decisions on cluster metadata, as Kafka's QuorumController managers (KIP-631).

`ControllerCore` mirrors ReplicationControlManager (topics, partitions, replica placement),
ConfigurationControlManager (via `config_control`), ClusterControlManager (broker registration)
and ProducerIdControlManager. Every operation reads the current image and returns
`(records, results)`; it never changes state. State changes only in `replay()`, with records
that the metadata log has committed, so a restarted controller that replays its log gets back
exactly the same image.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable, Sequence

from moldau.config.share_groups import ShareGroupConfig
from moldau.config.values import BrokerConfig, ConfigError, validate_topic_configs
from moldau.controller import (
    acl_control,
    cluster_control,
    config_control,
    feature_control,
    partition_control,
    placement,
    quota_control,
    reassignment,
    scram_control,
)
from moldau.controller.acl_control import AclDeletionResult, AclResult
from moldau.controller.cluster_control import BrokerHeartbeats
from moldau.controller.operations import (
    AlterConfigsResource,
    AlterPartitionResult,
    BrokerHeartbeat,
    BrokerHeartbeatResult,
    BrokerRegistration,
    BrokerRegistrationResult,
    ClientQuotaAlteration,
    ClientQuotaResult,
    ConfigResource,
    ConfigResult,
    ControllerRegistration,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteTopicResult,
    IncrementalAlterConfigsResource,
    IsrProposal,
    NewTopic,
    PartitionReassignment,
    PartitionResult,
    PartitionsIncrease,
    ProducerIdsBlock,
    ScramCredentialDeletion,
    ScramCredentialResult,
    ScramCredentialUpsertion,
    TopicPartitionsResult,
)
from moldau.controller.partition_limits import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS_PER_REQUEST,
    PartitionBudget,
    requested_total,
)
from moldau.controller.topic_names import (
    INTERNAL_TOPICS,
    INTERNAL_TOPICS_MODIFICATION,
    find_collision,
    refuse_internal_topic_change,
    validate_topic_name,
)
from moldau.metadata.acls import AclBinding, AclFilter
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage, TopicImage
from moldau.metadata.records import (
    ZERO_UUID,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK_SIZE = 1000


class ControllerCore:
    """Metadata decisions over an image; state only moves by `replay(records, offset)`."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        image: MetadataImage | None = None,
        uuid_factory: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        self.config = config
        self._image = image if image is not None else MetadataImage.empty()
        self._uuid_factory = uuid_factory
        self.heartbeats = BrokerHeartbeats(int(config.get("broker.session.timeout.ms")))
        # The bounds a group's share.* configs are checked against (a node whose properties
        # contradict them does not start: moldau.config.cluster.check_properties).
        self._share_groups = ShareGroupConfig.from_properties(config)

    @property
    def image(self) -> MetadataImage:
        return self._image

    def replay(self, records: Sequence[MetadataRecord], *, offset: int) -> MetadataDelta:
        """Apply committed records; `offset` is the log offset of the last of them."""
        delta = MetadataDelta(self._image)
        for record in records:
            delta.replay(record)
        delta.set_offset(offset)
        self._image = delta.apply()
        return delta

    def apply_delta(self, delta: MetadataDelta) -> None:
        """Adopt a delta that carries no records (a controller change) built on `image`."""
        if delta.base is not self._image:
            raise ValueError("a MetadataDelta applies only to the image it was built on")
        self._image = delta.apply()

    # Bootstrap.

    def bootstrap_records(self) -> list[MetadataRecord]:
        """Records a brand-new cluster starts with (Kafka's bootstrap metadata)."""
        return feature_control.bootstrap_records(self._image)

    # Topics.

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> tuple[list[MetadataRecord], list[CreateTopicResult]]:
        if requested_total(map(self._partitions_asked, topics)) > MAX_PARTITIONS_PER_REQUEST:
            return [], [
                _topic_error(t.name, ErrorCode.policy_violation, TOO_MANY_PARTITIONS_PER_REQUEST)
                for t in topics
            ]
        records: list[MetadataRecord] = []
        results: list[CreateTopicResult] = []
        counts = Counter(topic.name for topic in topics)
        names_in_use = set(self._image.topics)
        budget = PartitionBudget(self._image, self.config)
        for topic in topics:
            if counts[topic.name] > 1:
                results.append(
                    _topic_error(topic.name, ErrorCode.invalid_request, "Duplicate topic name.")
                )
                continue
            try:
                topic_records, result = self._create_topic(
                    topic,
                    names_in_use,
                    budget,
                    placed=sum(r.num_partitions for r in results if r.error_code == ErrorCode.none),
                )
            except KafkaError as error:
                results.append(_topic_error(topic.name, error.code, error.message))
                continue
            names_in_use.add(topic.name)
            results.append(result)
            if not validate_only:
                records.extend(topic_records)
        return records, results

    def _partitions_asked(self, topic: NewTopic) -> int:
        """How many partitions `topic` asks for, counted as Kafka counts them for its cap."""
        if topic.assignments:
            return len(topic.assignments)
        if topic.num_partitions == -1:
            return int(self.config.get("num.partitions"))
        return topic.num_partitions

    def _create_topic(
        self, topic: NewTopic, names_in_use: set[str], budget: PartitionBudget, *, placed: int
    ) -> tuple[list[MetadataRecord], CreateTopicResult]:
        """`placed`: partitions placed by topics earlier in the same request."""
        name = topic.name
        validate_topic_name(name)
        if name in names_in_use:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        collision = find_collision(name, names_in_use)
        if collision is not None:
            raise KafkaError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {collision}",
            )
        # A null value means "not set" (the broker's value applies); records keep the strings.
        configs = {k: v for k, v in topic.configs.items() if v is not None}
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        if topic.assignments:
            assignments = placement.check_manual_assignment(self._image, topic)
        else:
            num_partitions = topic.num_partitions
            if num_partitions == -1:
                num_partitions = int(self.config.get("num.partitions"))
            if num_partitions <= 0:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            replication_factor = topic.replication_factor
            if replication_factor == -1:
                replication_factor = int(self.config.get("default.replication.factor"))
            if replication_factor <= 0:
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            budget.check_count(num_partitions)
            assignments = self._place_replicas(num_partitions, replication_factor, placed=placed)
        budget.take(assignments)
        topic_id = self._new_topic_id()
        records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
        records.extend(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=name,
                name=config_name,
                value=value,
            )
            for config_name, value in sorted(configs.items())
        )
        records.extend(self._partition_records(topic_id, assignments, first=0))
        result = CreateTopicResult(
            name=name,
            topic_id=topic_id,
            num_partitions=len(assignments),
            replication_factor=len(assignments[0]),
            configs=configs,
        )
        return records, result

    def _place_replicas(
        self, num_partitions: int, replication_factor: int, *, placed: int = 0
    ) -> list[list[int]]:
        """Striped over racks and active brokers (`placement`), starting where the partitions
        placed so far leave off."""
        return placement.place_replicas(
            self._image.active_brokers(),
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            start=placed + sum(len(topic.partitions) for topic in self._image.topics.values()),
        )

    def _partition_records(
        self, topic_id: uuid.UUID, assignments: Sequence[Sequence[int]], *, first: int
    ) -> list[MetadataRecord]:
        records: list[MetadataRecord] = []
        for index, replicas in enumerate(assignments):
            isr = tuple(b for b in replicas if self._image.is_active_broker(b))
            records.append(
                PartitionRecord(
                    topic_id=topic_id,
                    partition=first + index,
                    replicas=tuple(replicas),
                    isr=isr,
                    leader=isr[0] if isr else -1,
                )
            )
        return records

    def _new_topic_id(self) -> uuid.UUID:
        while True:
            topic_id = self._uuid_factory()
            if topic_id != ZERO_UUID and topic_id not in self._image.topics_by_id:
                return topic_id

    def delete_topics(
        self, topics: Sequence[str | uuid.UUID]
    ) -> tuple[list[MetadataRecord], list[DeleteTopicResult]]:
        """Delete topics named by name or by topic id; results in the same order."""
        records: list[MetadataRecord] = []
        results: list[DeleteTopicResult] = []
        counts = Counter(topics)
        deleted: set[uuid.UUID] = set()
        enabled = bool(self.config.get("delete.topic.enable"))
        internal_allowed = bool(self.config.get(INTERNAL_TOPICS_MODIFICATION))
        for reference in topics:
            try:
                topic = self._find_topic(reference)
                if counts[reference] > 1:
                    raise KafkaError(
                        ErrorCode.invalid_request,
                        "Duplicate topic name."
                        if isinstance(reference, str)
                        else "Duplicate topic id.",
                    )
                if not enabled:
                    raise KafkaError(
                        ErrorCode.topic_deletion_disabled, "Topic deletion is disabled."
                    )
                if topic.name in INTERNAL_TOPICS and not internal_allowed:
                    raise refuse_internal_topic_change(topic.name, "delete")
            except KafkaError as error:
                results.append(
                    DeleteTopicResult(
                        name=reference if isinstance(reference, str) else None,
                        topic_id=reference if isinstance(reference, uuid.UUID) else ZERO_UUID,
                        error_code=error.code,
                        error_message=error.message,
                    )
                )
                continue
            if topic.topic_id not in deleted:
                deleted.add(topic.topic_id)
                records.append(RemoveTopicRecord(topic_id=topic.topic_id))
            results.append(DeleteTopicResult(name=topic.name, topic_id=topic.topic_id))
        return records, results

    def _find_topic(self, reference: str | uuid.UUID) -> TopicImage:
        if isinstance(reference, uuid.UUID):
            by_id = self._image.topics_by_id.get(reference)
            if by_id is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_id, f"Topic id {reference} does not exist."
                )
            return by_id
        by_name = self._image.topics.get(reference)
        if by_name is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        return by_name

    def create_partitions(
        self, increases: Sequence[PartitionsIncrease], *, validate_only: bool = False
    ) -> tuple[list[MetadataRecord], list[CreatePartitionsResult]]:
        if requested_total(map(self._partitions_added, increases)) > MAX_PARTITIONS_PER_REQUEST:
            return [], [
                CreatePartitionsResult(
                    name=increase.name,
                    error_code=ErrorCode.policy_violation,
                    error_message=TOO_MANY_PARTITIONS_PER_REQUEST,
                )
                for increase in increases
            ]
        records: list[MetadataRecord] = []
        results: list[CreatePartitionsResult] = []
        counts = Counter(increase.name for increase in increases)
        budget = PartitionBudget(self._image, self.config)
        internal_allowed = bool(self.config.get(INTERNAL_TOPICS_MODIFICATION))
        for increase in increases:
            try:
                if counts[increase.name] > 1:
                    raise KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
                if increase.name in INTERNAL_TOPICS and not internal_allowed:
                    # a group's or transactional id's partition is its hash modulo the count
                    raise refuse_internal_topic_change(increase.name, "add partitions to")
                new_records = self._create_partitions(increase, budget)
            except KafkaError as error:
                results.append(
                    CreatePartitionsResult(
                        name=increase.name, error_code=error.code, error_message=error.message
                    )
                )
                continue
            results.append(CreatePartitionsResult(name=increase.name))
            if not validate_only:
                records.extend(new_records)
        return records, results

    def _partitions_added(self, increase: PartitionsIncrease) -> int:
        """How many partitions `increase` asks for (its assignments, when given, say)."""
        if increase.assignments is not None:
            return len(increase.assignments)
        topic = self._image.topics.get(increase.name)
        return increase.count - len(topic.partitions) if topic is not None else 0

    def _create_partitions(
        self, increase: PartitionsIncrease, budget: PartitionBudget
    ) -> list[MetadataRecord]:
        topic = self._find_topic(increase.name)
        current = len(topic.partitions)
        if increase.count < current:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {increase.count}.",
            )
        if increase.count == current:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
            )
        added = increase.count - current
        replication_factor = topic.replication_factor or 1
        if increase.assignments is not None:
            if len(increase.assignments) != added:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(increase.assignments)} assignment(s) were specified.",
                )
            assignments = [list(replicas) for replicas in increase.assignments]
            for replicas in assignments:
                placement.check_replicas(self._image, replicas, expected_length=replication_factor)
        else:
            budget.check_count(added)
            assignments = self._place_replicas(added, replication_factor)
        budget.take(assignments)
        return self._partition_records(topic.topic_id, assignments, first=current)

    # Leaders and replicas.

    def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[list[MetadataRecord], list[TopicPartitionsResult]]:
        return partition_control.elect_leaders(self._image, election_type, topic_partitions)

    def alter_partition(
        self, *, broker_id: int, broker_epoch: int, changes: Sequence[IsrProposal]
    ) -> tuple[list[MetadataRecord], list[AlterPartitionResult]]:
        """A partition leader's ISR changes (AlterPartition, KIP-497)."""
        return partition_control.alter_partition(
            self._image,
            self.config,
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            changes=changes,
        )

    def balance_partition_leaders(self) -> tuple[list[MetadataRecord], None]:
        """Preferred replicas back in the lead where `leader.imbalance.per.broker.percentage`
        says a broker is imbalanced (the `auto.leader.rebalance.enable` timer's operation)."""
        records = partition_control.balance_partition_leaders(
            self._image,
            imbalance_percentage=int(self.config.get("leader.imbalance.per.broker.percentage")),
        )
        return list(records), None

    def alter_partition_reassignments(
        self,
        reassignments: Sequence[PartitionReassignment],
        *,
        allow_replication_factor_change: bool = True,
    ) -> tuple[list[MetadataRecord], list[PartitionResult]]:
        return reassignment.alter_partition_reassignments(
            self._image,
            self.config,
            reassignments,
            allow_replication_factor_change=allow_replication_factor_change,
        )

    # Client quotas.

    def alter_client_quotas(
        self, alterations: Sequence[ClientQuotaAlteration], *, validate_only: bool = False
    ) -> tuple[list[MetadataRecord], list[ClientQuotaResult]]:
        return quota_control.alter_client_quotas(
            self._image, alterations, validate_only=validate_only
        )

    # ACLs.

    def create_acls(
        self, bindings: Sequence[AclBinding]
    ) -> tuple[list[MetadataRecord], list[AclResult]]:
        return acl_control.create_acls(self._image, bindings)

    def delete_acls(
        self, filters: Sequence[AclFilter]
    ) -> tuple[list[MetadataRecord], list[AclDeletionResult]]:
        return acl_control.delete_acls(self._image, filters)

    # SCRAM credentials.

    def alter_user_scram_credentials(
        self,
        deletions: Sequence[ScramCredentialDeletion],
        upsertions: Sequence[ScramCredentialUpsertion],
    ) -> tuple[list[MetadataRecord], list[ScramCredentialResult]]:
        return scram_control.alter_user_scram_credentials(self._image, deletions, upsertions)

    # Configs.

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False
    ) -> tuple[list[MetadataRecord], list[ConfigResult]]:
        return self._change_configs(
            [
                (
                    r.resource,
                    functools.partial(
                        config_control.alter_configs,
                        self._image,
                        r.resource,
                        r.configs,
                        share_groups=self._share_groups,
                    ),
                )
                for r in resources
            ],
            validate_only=validate_only,
        )

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *, validate_only: bool = False
    ) -> tuple[list[MetadataRecord], list[ConfigResult]]:
        return self._change_configs(
            [
                (
                    r.resource,
                    functools.partial(
                        config_control.incremental_alter_configs,
                        self._image,
                        r.resource,
                        r.configs,
                        share_groups=self._share_groups,
                    ),
                )
                for r in resources
            ],
            validate_only=validate_only,
        )

    def _change_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Callable[[], list[ConfigRecord]]]],
        *,
        validate_only: bool,
    ) -> tuple[list[MetadataRecord], list[ConfigResult]]:
        records: list[MetadataRecord] = []
        results: list[ConfigResult] = []
        counts = Counter((r.resource_type, r.resource_name) for r, _ in changes)
        for resource, make_records in changes:
            try:
                if counts[(resource.resource_type, resource.resource_name)] > 1:
                    raise KafkaError(
                        ErrorCode.invalid_request,
                        f"Duplicate resource {resource.resource_name!r} in the request.",
                    )
                new_records = make_records()
            except KafkaError as error:
                results.append(
                    ConfigResult(
                        resource=resource, error_code=error.code, error_message=error.message
                    )
                )
                continue
            results.append(ConfigResult(resource=resource))
            if not validate_only:
                records.extend(new_records)
        return records, results

    # Brokers and producer ids.

    def activate(self, *, now_ms: int) -> None:
        """This controller became the active one: start every broker's session now."""
        self.heartbeats.activate(self._image, now_ms)

    def register_broker(
        self, registration: BrokerRegistration, *, now_ms: int = 0, unfence: bool = True
    ) -> tuple[list[MetadataRecord], BrokerRegistrationResult]:
        """A new incarnation of a broker; its epoch is above every epoch handed out before.
        Fenced until it catches up, unless `unfence` (a standalone node's own broker)."""
        return cluster_control.register_broker(
            self._image,
            self.config,
            self.heartbeats,
            registration,
            now_ms=now_ms,
            unfence=unfence,
        )

    def broker_heartbeat(
        self, heartbeat: BrokerHeartbeat, *, now_ms: int
    ) -> tuple[list[MetadataRecord], BrokerHeartbeatResult]:
        return cluster_control.broker_heartbeat(
            self._image, self.config, self.heartbeats, heartbeat, now_ms=now_ms
        )

    def register_controller(
        self, registration: ControllerRegistration
    ) -> tuple[list[MetadataRecord], None]:
        """A controller's listeners and features (KIP-919, `cluster_control`)."""
        return cluster_control.register_controller(self._image, registration)

    def fence_expired_brokers(self, *, now_ms: int) -> tuple[list[MetadataRecord], None]:
        return cluster_control.fence_expired_brokers(
            self._image, self.config, self.heartbeats, now_ms=now_ms
        ), None

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int = -1
    ) -> tuple[list[MetadataRecord], ProducerIdsBlock]:
        """The next block of producer ids for `broker_id` (epoch -1 skips the epoch check)."""
        broker = self._image.brokers.get(broker_id)
        if broker is None:
            raise KafkaError(
                ErrorCode.broker_id_not_registered, f"Broker {broker_id} is not registered."
            )
        if broker_epoch != -1 and broker_epoch != broker.broker_epoch:
            raise KafkaError(
                ErrorCode.stale_broker_epoch,
                f"Broker {broker_id} has epoch {broker.broker_epoch}, not {broker_epoch}.",
            )
        first = self._image.next_producer_id
        record = ProducerIdsRecord(
            broker_id=broker_id,
            broker_epoch=broker.broker_epoch,
            next_producer_id=first + PRODUCER_ID_BLOCK_SIZE,
        )
        return [record], ProducerIdsBlock(
            assigned_broker_id=broker_id, first_producer_id=first, size=PRODUCER_ID_BLOCK_SIZE
        )


def _topic_error(name: str, code: ErrorCode, message: str | None) -> CreateTopicResult:
    return CreateTopicResult(name=name, error_code=code, error_message=message)
