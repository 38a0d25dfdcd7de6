"""Where the replicas of new partitions go, with the goals of Kafka's StripedReplicaPlacer:
replicas spread across racks first (`broker.rack`), then across brokers, leaders spread too.
Explicit assignments are checked here as Kafka checks them (`check_manual_assignment`,
`check_replicas`).

Racks are sorted (brokers without a rack form one rack, first), brokers within a rack too.
Partition number `e` (counted from `start`, so that successive topics do not all begin on the
same broker) takes its leader from rack `e mod R` and its followers from the racks after it,
round after round until it has `replication_factor` replicas; within a rack the `k`-th pick of
rack position `j` is broker `(e div R + j + k) mod size`. With racks of equal size this puts
each broker in the lead equally often and gives every broker as many replicas; with one rack it
is plain round-robin. Unlike Kafka (which randomises the starting points), the layout is a
function of `start`, so the controller's decisions are reproducible.

Only active brokers (unfenced, not shutting down) are given replicas, so a replication factor
above their number is INVALID_REPLICATION_FACTOR (Kafka also places followers on fenced brokers
when it must; Moldau does not).
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.controller.operations import NewTopic
from moldau.metadata.image import BrokerImage, MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError

# Internal topics of replication factor 3 or more accept acks=all writes with one replica down.
INTERNAL_TOPIC_MIN_INSYNC_REPLICAS = 2


def place_replicas(
    brokers: Sequence[BrokerImage],
    *,
    num_partitions: int,
    replication_factor: int,
    start: int,
) -> list[list[int]]:
    """Replica lists (leader first) for `num_partitions` new partitions on `brokers`."""
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered and active.",
        )
    by_rack: dict[str, list[int]] = {}
    for broker in brokers:
        by_rack.setdefault(broker.rack or "", []).append(broker.broker_id)
    racks = [sorted(by_rack[name]) for name in sorted(by_rack)]
    return [
        _place_one(racks, replication_factor, start + partition)
        for partition in range(num_partitions)
    ]


def _place_one(racks: list[list[int]], replication_factor: int, number: int) -> list[int]:
    count = len(racks)
    first, lap = number % count, number // count
    order = racks[first:] + racks[:first]
    replicas: list[int] = []
    pick = 0
    while len(replicas) < replication_factor:
        for position, rack in enumerate(order):
            if len(replicas) == replication_factor:
                break
            if pick < len(rack):
                replicas.append(rack[(lap + position + pick) % len(rack)])
        pick += 1
    return replicas


def check_manual_assignment(image: MetadataImage, topic: NewTopic) -> list[list[int]]:
    """CreateTopics' explicit assignment, checked as Kafka checks it; the replica lists."""
    if topic.num_partitions != -1:
        raise KafkaError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    if topic.replication_factor != -1:
        raise KafkaError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replicationFactor was not set to -1.",
        )
    if sorted(topic.assignments) != list(range(len(topic.assignments))):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    assignments = [list(topic.assignments[p]) for p in range(len(topic.assignments))]
    for replicas in assignments:
        check_replicas(image, replicas, expected_length=len(assignments[0]))
    return assignments


def check_replicas(image: MetadataImage, replicas: Sequence[int], *, expected_length: int) -> None:
    """One partition's explicit replicas: INVALID_REPLICA_ASSIGNMENT unless they are distinct,
    registered, as many as the others' and not all fenced or shutting down."""
    if not replicas:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(replicas)) != len(replicas):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes duplicate replicas: {list(replicas)}",
        )
    if len(replicas) != expected_length:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{expected_length} replica(s).",
        )
    for broker_id in replicas:
        if broker_id not in image.brokers:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
    if not any(image.is_active_broker(b) for b in replicas):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"All brokers specified in the manual partition assignment {list(replicas)} "
            "are fenced or in controlled shutdown.",
        )


def internal_topic_replication(configured: int, active_brokers: int) -> tuple[int, dict[str, str]]:
    """The replication factor of an internal topic (`offsets.topic.replication.factor`,
    `transaction.state.log.replication.factor`), capped to the active brokers when fewer exist
    (a single node has one), and the configs it is created with: `min.insync.replicas=2` from a
    replication factor of 3 on."""
    replication_factor = max(1, min(configured, active_brokers))
    configs: dict[str, str] = {}
    if replication_factor >= 3:
        configs["min.insync.replicas"] = str(INTERNAL_TOPIC_MIN_INSYNC_REPLICAS)
    return replication_factor, configs
