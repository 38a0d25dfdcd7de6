"""Where the replicas of new partitions go, with the goals of Kafka's StripedReplicaPlacer:
replicas spread across racks first (`broker.rack`), then across brokers, leaders spread too.

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

from moldau.metadata.image import BrokerImage
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
