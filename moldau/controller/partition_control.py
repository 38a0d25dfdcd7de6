"""Leader elections and partition reassignments, as Kafka's ReplicationControlManager (KIP-460,
KIP-455).

`elect_leaders` moves leadership to the preferred replica (the first of the replica list) or,
for an unclean election, to any live replica of a leaderless partition; a partition that
already has the leader asked for is ELECTION_NOT_NEEDED. `alter_partition_reassignments`
validates the target replicas as Kafka does; a target equal to the current replicas is a no-op
success and cancelling is NO_REASSIGNMENT_IN_PROGRESS when none is in progress. Moving replicas
to other brokers needs follower catch-up first and is refused for now.
Both return `(records, results)` and never change the image.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.controller.operations import (
    ElectionType,
    PartitionReassignment,
    PartitionResult,
    TopicPartitionsResult,
)
from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import MetadataRecord, PartitionChangeRecord
from moldau.protocol.errors import ErrorCode, KafkaError

NO_REASSIGNMENT_IN_PROGRESS = "No partition reassignment is in progress."


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
    record = _election_record(image, topic, partition, election)
    if isinstance(record, PartitionResult):
        return record
    records.append(record)
    return PartitionResult(partition=index)


def _election_record(
    image: MetadataImage, topic: TopicImage, partition: PartitionImage, election: ElectionType
) -> PartitionChangeRecord | PartitionResult:
    index = partition.partition

    def is_live(broker_id: int) -> bool:
        broker = image.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    if election is ElectionType.PREFERRED:
        preferred = partition.replicas[0] if partition.replicas else -1
        if partition.leader == preferred:
            return PartitionResult(partition=index, error_code=ErrorCode.election_not_needed)
        if preferred in partition.isr and is_live(preferred):
            return PartitionChangeRecord(topic_id=topic.topic_id, partition=index, leader=preferred)
        return PartitionResult(partition=index, error_code=ErrorCode.preferred_leader_not_available)
    if partition.leader != -1:
        return PartitionResult(partition=index, error_code=ErrorCode.election_not_needed)
    for broker_id in partition.isr:
        if is_live(broker_id):
            return PartitionChangeRecord(topic_id=topic.topic_id, partition=index, leader=broker_id)
    for broker_id in partition.replicas:
        if is_live(broker_id):
            return PartitionChangeRecord(
                topic_id=topic.topic_id, partition=index, leader=broker_id, isr=(broker_id,)
            )
    return PartitionResult(partition=index, error_code=ErrorCode.eligible_leaders_not_available)


def alter_partition_reassignments(
    image: MetadataImage,
    reassignments: Sequence[PartitionReassignment],
    *,
    allow_replication_factor_change: bool = True,
) -> tuple[list[MetadataRecord], list[PartitionResult]]:
    """Results in request order, one per reassignment."""
    results: list[PartitionResult] = []
    for reassignment in reassignments:
        try:
            _check_reassignment(
                image,
                reassignment,
                allow_replication_factor_change=allow_replication_factor_change,
            )
        except KafkaError as error:
            results.append(
                PartitionResult(
                    partition=reassignment.partition,
                    error_code=error.code,
                    error_message=error.message,
                )
            )
            continue
        results.append(PartitionResult(partition=reassignment.partition))
    return [], results


def _check_reassignment(
    image: MetadataImage,
    reassignment: PartitionReassignment,
    *,
    allow_replication_factor_change: bool,
) -> None:
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
    in_progress = bool(partition.adding_replicas or partition.removing_replicas)
    target = reassignment.replicas
    if target is None:
        if not in_progress:
            raise KafkaError(ErrorCode.no_reassignment_in_progress, NO_REASSIGNMENT_IN_PROGRESS)
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "Cancelling a partition reassignment is not supported yet.",
        )
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
    if not allow_replication_factor_change and len(target) != len(partition.replicas):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {len(partition.replicas)} to {len(target)}",
        )
    if tuple(target) != partition.replicas:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "Moving partition replicas to other brokers is not supported yet.",
        )


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
