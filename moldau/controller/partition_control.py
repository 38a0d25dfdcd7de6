"""Leaders and ISRs of partitions, as Kafka's ReplicationControlManager (KIP-631, KIP-497,
KIP-460, KIP-455).

- `broker_leaves`: a broker fenced or shutting down leaves every ISR it is in (except where it
  is the last member) and leads nothing: each partition it led gets a new leader from the rest
  of its ISR, or none (-1) unless the topic allows an unclean election.
- `broker_joins`: a broker unfenced makes leaderless partitions electable again.
- `alter_partition`: a leader's ISR change (AlterPartition), checked as Kafka checks it.
- `elect_leaders`: ElectLeaders, preferred or unclean (KIP-460).
- `balance_partition_leaders`: the leader rebalance (`auto.leader.rebalance.enable`).

Reassignments (KIP-455) are started and cancelled in `reassignment`; every change below also
completes one whose adding replicas all joined the ISR (`partition_change`).

Every leader and ISR change is decided by `partition_change` (Kafka's PartitionChangeBuilder).
All functions return records (and results) and never change the image.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from moldau.config.values import BrokerConfig
from moldau.controller.config_control import topic_config_value
from moldau.controller.operations import (
    AlterPartitionResult,
    ElectionType,
    IsrProposal,
    PartitionResult,
    TopicPartitionsResult,
)
from moldau.controller.partition_change import Election, partition_change
from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import LeaderRecoveryState, MetadataRecord, PartitionChangeRecord
from moldau.protocol.errors import ErrorCode, KafkaError

# At most this many preferred-leader elections per rebalance (Kafka's maxElectionsPerImbalance).
MAX_ELECTIONS_PER_REBALANCE = 1000


def online_or_unclean(image: MetadataImage, config: BrokerConfig, topic: TopicImage) -> Election:
    """UNCLEAN where the topic (or the cluster's default) allows an unclean election."""
    if topic_config_value(image, config, topic.name, "unclean.leader.election.enable"):
        return Election.UNCLEAN
    return Election.ONLINE


# --- brokers leaving and joining -------------------------------------------------------------


def broker_leaves(
    image: MetadataImage, config: BrokerConfig, broker_id: int
) -> list[PartitionChangeRecord]:
    """A broker is being fenced or shut down: take it out of every ISR (unless it is the last
    member) and move its leaderships away (Kafka's generateLeaderAndIsrUpdates with a broker
    to remove). It may not lead even where it stays in the ISR."""

    def may_lead(replica: int) -> bool:
        return replica != broker_id and image.is_active_broker(replica)

    records: list[PartitionChangeRecord] = []
    for topic, partition in _partitions(image):
        if broker_id not in partition.isr and partition.leader != broker_id:
            continue
        record = partition_change(
            topic.topic_id,
            partition,
            may_lead=may_lead,
            target_isr=[replica for replica in partition.isr if replica != broker_id],
            election=online_or_unclean(image, config, topic),
        )
        if record is not None:
            records.append(record)
    return records


def broker_joins(
    image: MetadataImage, config: BrokerConfig, broker_id: int
) -> list[PartitionChangeRecord]:
    """A broker is being unfenced (the image still shows it fenced): elect leaders of leaderless
    partitions, which it may now lead (Kafka's handleBrokerUnfenced)."""

    def may_lead(replica: int) -> bool:
        return replica == broker_id or image.is_active_broker(replica)

    records: list[PartitionChangeRecord] = []
    for topic, partition in _partitions(image):
        if partition.has_leader:
            continue
        record = partition_change(
            topic.topic_id,
            partition,
            may_lead=may_lead,
            election=online_or_unclean(image, config, topic),
        )
        if record is not None:
            records.append(record)
    return records


def leads_partitions(image: MetadataImage, broker_id: int) -> bool:
    return any(partition.leader == broker_id for _, partition in _partitions(image))


def _partitions(image: MetadataImage) -> Iterable[tuple[TopicImage, PartitionImage]]:
    """Every partition, in a stable order (topics by name, partitions by index)."""
    for _, topic in sorted(image.topics.items()):
        for _, partition in sorted(topic.partitions.items()):
            yield topic, partition


# --- AlterPartition --------------------------------------------------------------------------


def alter_partition(
    image: MetadataImage,
    config: BrokerConfig,
    *,
    broker_id: int,
    broker_epoch: int,
    changes: Sequence[IsrProposal],
) -> tuple[list[MetadataRecord], list[AlterPartitionResult]]:
    """A leader's ISR changes (KIP-497), one result per change in request order.

    Raises STALE_BROKER_EPOCH when `broker_id` is not registered with `broker_epoch`. Each
    change is checked in Kafka's order: unknown topic (UNKNOWN_TOPIC_ID) or partition
    (UNKNOWN_TOPIC_OR_PARTITION); epochs newer than the controller's (NOT_CONTROLLER: the
    broker has heard of a newer controller); an older leader epoch (FENCED_LEADER_EPOCH); a
    sender that is not the leader (INVALID_REQUEST); an older partition epoch
    (INVALID_UPDATE_VERSION); an ISR with duplicates, non-replicas or without the leader, more
    than the leader while RECOVERING, or RECOVERED back to RECOVERING (INVALID_REQUEST); a
    member that is not registered, fenced, shutting down or of another broker epoch
    (INELIGIBLE_REPLICA). As in Kafka, the ISR may shrink to the leader alone:
    `min.insync.replicas` is enforced on acks=all produce, not here."""
    registered = image.brokers.get(broker_id)
    if registered is None or registered.broker_epoch != broker_epoch:
        raise KafkaError(
            ErrorCode.stale_broker_epoch,
            f"Broker {broker_id} is not registered with epoch {broker_epoch}.",
        )
    records: list[MetadataRecord] = []
    results: list[AlterPartitionResult] = []
    changed: dict[tuple[uuid.UUID, int], PartitionImage] = {}
    for change in changes:
        key = (change.topic_id, change.partition)
        topic = image.topics_by_id.get(change.topic_id)
        partition = changed.get(key) or (
            topic.partitions.get(change.partition) if topic is not None else None
        )
        try:
            if topic is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_id, f"Topic id {change.topic_id} does not exist."
                )
            if partition is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_or_partition,
                    f"Partition {topic.name}-{change.partition} does not exist.",
                )
            _check_isr_change(image, broker_id, topic, partition, change)
        except KafkaError as error:
            results.append(
                AlterPartitionResult(
                    topic_id=change.topic_id,
                    partition=change.partition,
                    error_code=error.code,
                    error_message=error.message,
                )
            )
            continue
        record = partition_change(
            topic.topic_id,
            partition,
            may_lead=image.is_active_broker,
            target_isr=[member.broker_id for member in change.new_isr],
            election=online_or_unclean(image, config, topic),
            target_recovery_state=change.leader_recovery_state,
        )
        if record is not None:
            records.append(record)
            partition = changed[key] = partition.merge(record)
            if partition.leader != broker_id:  # (only a reassignment could do this in Kafka)
                results.append(
                    AlterPartitionResult(
                        topic_id=change.topic_id,
                        partition=change.partition,
                        error_code=ErrorCode.new_leader_elected,
                        error_message=f"Broker {partition.leader} now leads the partition.",
                    )
                )
                continue
        results.append(
            AlterPartitionResult(
                topic_id=change.topic_id,
                partition=change.partition,
                leader_id=partition.leader,
                leader_epoch=partition.leader_epoch,
                isr=partition.isr,
                leader_recovery_state=partition.leader_recovery_state,
                partition_epoch=partition.partition_epoch,
            )
        )
    return records, results


def _check_isr_change(
    image: MetadataImage,
    broker_id: int,
    topic: TopicImage,
    partition: PartitionImage,
    change: IsrProposal,
) -> None:
    name = f"{topic.name}-{partition.partition}"
    if (
        change.leader_epoch > partition.leader_epoch
        or change.partition_epoch > partition.partition_epoch
    ):
        raise KafkaError(
            ErrorCode.not_controller,
            f"{name} has leader epoch {partition.leader_epoch} and partition epoch "
            f"{partition.partition_epoch} here, older than the request's: this controller "
            "may no longer be the active one.",
        )
    if change.leader_epoch < partition.leader_epoch:
        raise KafkaError(
            ErrorCode.fenced_leader_epoch,
            f"{name} has leader epoch {partition.leader_epoch}, not {change.leader_epoch}.",
        )
    if broker_id != partition.leader:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Broker {broker_id} does not lead {name}; broker {partition.leader} does.",
        )
    if change.partition_epoch < partition.partition_epoch:
        raise KafkaError(
            ErrorCode.invalid_update_version,
            f"{name} has partition epoch {partition.partition_epoch}, "
            f"not {change.partition_epoch}.",
        )
    new_isr = [member.broker_id for member in change.new_isr]
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"The ISR {new_isr} of {name} must be distinct replicas of {partition.replicas}.",
        )
    if partition.leader not in new_isr:
        raise KafkaError(
            ErrorCode.invalid_request, f"The ISR {new_isr} of {name} leaves out its leader."
        )
    recovering = change.leader_recovery_state == LeaderRecoveryState.RECOVERING
    if recovering and len(new_isr) > 1:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"The ISR of {name} may hold only its leader while the leader is recovering from "
            "an unclean election.",
        )
    if recovering and partition.leader_recovery_state == LeaderRecoveryState.RECOVERED:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"The leader of {name} cannot go back from RECOVERED to RECOVERING.",
        )
    ineligible = []
    for member in change.new_isr:
        broker = image.brokers.get(member.broker_id)
        if broker is None:
            ineligible.append(f"{member.broker_id} (not registered)")
        elif broker.in_controlled_shutdown:
            ineligible.append(f"{member.broker_id} (shutting down)")
        elif broker.fenced:
            ineligible.append(f"{member.broker_id} (fenced)")
        elif member.broker_epoch not in (-1, broker.broker_epoch):
            ineligible.append(
                f"{member.broker_id} (broker epoch {broker.broker_epoch}, "
                f"not {member.broker_epoch})"
            )
    if ineligible:
        raise KafkaError(
            ErrorCode.ineligible_replica,
            f"The ISR of {name} names ineligible replicas: {', '.join(ineligible)}.",
        )


# --- elections -------------------------------------------------------------------------------


def elect_leaders(
    image: MetadataImage,
    election_type: int,
    topic_partitions: Sequence[tuple[str, Sequence[int]]] | None,
) -> tuple[list[MetadataRecord], list[TopicPartitionsResult]]:
    """Elect leaders of the named partitions, or of every partition when None is given.

    For every partition, Kafka leaves out those that need no election, so every topic is
    listed, perhaps with no partitions. Raises INVALID_REQUEST for an unknown election type."""
    try:
        election = ElectionType(election_type)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Unknown election type {election_type}"
        ) from None
    records: list[MetadataRecord] = []
    results: list[TopicPartitionsResult] = []
    if topic_partitions is None:
        for name, topic in sorted(image.topics.items()):
            outcomes = [_elect(image, name, index, election, records) for index in topic.partitions]
            results.append(
                TopicPartitionsResult(
                    topic=name,
                    partitions=[
                        r for r in outcomes if r.error_code != ErrorCode.election_not_needed
                    ],
                )
            )
        return records, results
    for name, partitions in topic_partitions:
        results.append(
            TopicPartitionsResult(
                topic=name,
                partitions=[_elect(image, name, index, election, records) for index in partitions],
            )
        )
    return records, results


def _elect(
    image: MetadataImage,
    topic_name: str,
    index: int,
    election: ElectionType,
    records: list[MetadataRecord],
) -> PartitionResult:
    try:
        topic, partition = _find_partition(image, topic_name, index)
    except KafkaError as error:
        return PartitionResult(partition=index, error_code=error.code, error_message=error.message)
    if election is ElectionType.PREFERRED:
        needed = partition.leader != partition.preferred_replica
        how, unavailable = Election.PREFERRED, ErrorCode.preferred_leader_not_available
    else:
        needed = not partition.has_leader
        how, unavailable = Election.UNCLEAN, ErrorCode.eligible_leaders_not_available
    if not needed:
        return PartitionResult(partition=index, error_code=ErrorCode.election_not_needed)
    record = partition_change(
        topic.topic_id, partition, may_lead=image.is_active_broker, election=how
    )
    if record is None:
        return PartitionResult(partition=index, error_code=unavailable)
    records.append(record)
    return PartitionResult(partition=index)


def balance_partition_leaders(
    image: MetadataImage,
    *,
    imbalance_percentage: int,
    limit: int = MAX_ELECTIONS_PER_REBALANCE,
) -> list[PartitionChangeRecord]:
    """Move leaderships back to preferred replicas that are in the ISR and active, for every
    broker whose share of partitions it prefers but does not lead is above
    `imbalance_percentage` (`leader.imbalance.per.broker.percentage`, as Kafka's ZooKeeper
    controller applies it; Kafka's KRaft controller balances every imbalanced partition, which
    is 0 here). At most `limit` elections. Partitions under reassignment are left alone: their
    replicas (so their preferred replica) change when it completes, which elects anew."""
    preferred: dict[int, list[tuple[TopicImage, PartitionImage]]] = {}
    for topic, partition in _partitions(image):
        if partition.is_reassigning:
            continue
        preferred.setdefault(partition.preferred_replica, []).append((topic, partition))
    records: list[PartitionChangeRecord] = []
    for broker_id, partitions in sorted(preferred.items()):
        imbalanced = [(t, p) for t, p in partitions if p.leader != broker_id]
        if not imbalanced or not image.is_active_broker(broker_id):
            continue
        if len(imbalanced) * 100 <= imbalance_percentage * len(partitions):
            continue
        for topic, partition in imbalanced:
            if len(records) >= limit:
                return records
            record = partition_change(
                topic.topic_id,
                partition,
                may_lead=image.is_active_broker,
                election=Election.PREFERRED,
            )
            if record is not None:
                records.append(record)
    return records


def _find_partition(
    image: MetadataImage, topic_name: str, index: int
) -> tuple[TopicImage, PartitionImage]:
    topic = image.topics.get(topic_name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"No such topic as {topic_name}")
    partition = topic.partitions.get(index)
    if partition is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"No such partition as {topic_name}-{index}"
        )
    return topic, partition
