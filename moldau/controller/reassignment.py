"""Partition reassignments (KIP-455), as Kafka's ReplicationControlManager starts, completes and
cancels them.

Starting: a target replica list T for a partition with replicas R makes the replicas
`T + (R - T)` with `adding = T - R` and `removing = R - T` (sorted, one PartitionChangeRecord);
the ISR and the leader stay. The adding replicas start following the leader; its AlterPartition
takes them into the ISR, and the change that leaves every replica of T in the ISR completes the
reassignment (`partition_change`): replicas = T, ISR = ISR - removing, a new leader if the old
one left. A target whose replicas are all in the ISR already completes at once. A new target while one is in progress starts
from the replicas as they stand (the earlier target's adding replicas not in the new one leave).

Cancelling (null target): the replicas and the ISR lose the adding replicas and the removing
ones stay; a leader among the adding replicas gives way. If no ISR member would be left that
takes an unclean election, which only a topic allowing one may have.

Listing needs no state of its own: `PartitionImage.adding_replicas`/`removing_replicas`.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.config.values import BrokerConfig
from moldau.controller import partition_control
from moldau.controller.operations import PartitionReassignment, PartitionResult
from moldau.controller.partition_change import Election, partition_change
from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import MetadataRecord, PartitionChangeRecord
from moldau.protocol.errors import ErrorCode, KafkaError

NO_REASSIGNMENT_IN_PROGRESS = "No partition reassignment is in progress."


def alter_partition_reassignments(
    image: MetadataImage,
    config: BrokerConfig,
    reassignments: Sequence[PartitionReassignment],
    *,
    allow_replication_factor_change: bool = True,
) -> tuple[list[MetadataRecord], list[PartitionResult]]:
    """Start, replace or cancel reassignments; results in request order, one per entry. A
    partition named twice is decided on the state the first entry left."""
    records: list[MetadataRecord] = []
    results: list[PartitionResult] = []
    changed: dict[tuple[str, int], PartitionImage] = {}
    for reassignment in reassignments:
        key = (reassignment.topic, reassignment.partition)
        try:
            topic, partition = _find_partition(image, reassignment)
            partition = changed.get(key, partition)
            if reassignment.replicas is None:
                record = _cancel(image, config, topic, partition)
            else:
                _check_target(
                    image,
                    partition,
                    reassignment.replicas,
                    allow_replication_factor_change=allow_replication_factor_change,
                )
                record = _start(image, config, topic, partition, reassignment.replicas)
        except KafkaError as error:
            results.append(
                PartitionResult(
                    partition=reassignment.partition,
                    error_code=error.code,
                    error_message=error.message,
                )
            )
            continue
        if record is not None:
            records.append(record)
            changed[key] = partition.merge(record)
        results.append(PartitionResult(partition=reassignment.partition))
    return records, results


def _start(
    image: MetadataImage,
    config: BrokerConfig,
    topic: TopicImage,
    partition: PartitionImage,
    target: Sequence[int],
) -> PartitionChangeRecord | None:
    current = partition.replicas
    removing = sorted(set(current) - set(target))
    return partition_change(
        topic.topic_id,
        partition,
        may_lead=image.is_active_broker,
        election=partition_control.online_or_unclean(image, config, topic),
        target_replicas=[*target, *removing],
        target_adding=sorted(set(target) - set(current)),
        target_removing=removing,
    )


def _cancel(
    image: MetadataImage, config: BrokerConfig, topic: TopicImage, partition: PartitionImage
) -> PartitionChangeRecord | None:
    if not partition.is_reassigning:
        raise KafkaError(ErrorCode.no_reassignment_in_progress, NO_REASSIGNMENT_IN_PROGRESS)
    adding = set(partition.adding_replicas)
    replicas = [r for r in partition.replicas if r not in adding]
    isr = [r for r in partition.isr if r not in adding]
    election = partition_control.online_or_unclean(image, config, topic)
    if not isr and (
        election is not Election.UNCLEAN or not any(map(image.is_active_broker, replicas))
    ):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"Unable to revert partition assignment for {topic.name}:{partition.partition} "
            "because it would require an unclean leader election.",
        )
    return partition_change(
        topic.topic_id,
        partition,
        may_lead=image.is_active_broker,
        election=election,
        target_isr=isr,
        target_replicas=replicas,
        target_adding=(),
        target_removing=(),
    )


def _find_partition(
    image: MetadataImage, reassignment: PartitionReassignment
) -> tuple[TopicImage, PartitionImage]:
    topic = image.topics.get(reassignment.topic)
    if topic is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition,
            f"Unable to find a topic named {reassignment.topic}.",
        )
    partition = topic.partitions.get(reassignment.partition)
    if partition is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition,
            f"Unable to find partition {reassignment.topic}:{reassignment.partition}.",
        )
    return topic, partition


def _check_target(
    image: MetadataImage,
    partition: PartitionImage,
    target: Sequence[int],
    *,
    allow_replication_factor_change: bool,
) -> None:
    """Kafka's checks of a manual assignment: not empty, registered brokers, each once; the
    length of the replicas the partition is heading for when the factor may not change."""
    if not target:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous: int | None = None
    for broker_id in sorted(target):
        if broker_id not in image.brokers:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    factor = len(partition.replicas) - len(partition.removing_replicas)
    if not allow_replication_factor_change and len(target) != factor:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {factor} to {len(target)}",
        )
