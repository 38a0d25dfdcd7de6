"""How many partitions a request, the cluster and one broker may have (part of Kafka's
ReplicationControlManager; the per-broker and cluster caps are KIP-578's proposal).

Checked with arithmetic on the counts a request asks for, before any replica is placed or any
record built, so a request for 2^31-1 partitions costs nothing but its refusal:

- one CreateTopics or CreatePartitions request adds at most `MAX_PARTITIONS_PER_REQUEST`
  partitions (Kafka 4's `MAX_PARTITIONS_PER_BATCH`, KAFKA-17870): above it every topic of the
  request is refused with POLICY_VIOLATION and Kafka's message;
- `max.partitions` caps the partitions of the cluster and `max.broker.partitions` the partition
  replicas one broker hosts (names from KIP-578, which Kafka never adopted; refused with
  POLICY_VIOLATION, as a create-topic policy would be, since clients know no other code for it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from moldau.config.values import BrokerConfig
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError

MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS_PER_REQUEST = "Excessively large number of partitions per request."


def requested_total(counts: Iterable[int]) -> int:
    """Partitions a request asks for in all: non-positive counts (refused later) add nothing."""
    return sum(count for count in counts if count > 0)


class PartitionBudget:
    """The room left for new partitions while one request is decided: the cluster's count and
    each broker's replica count, taken from the image once and moved on as topics are accepted."""

    def __init__(self, image: MetadataImage, config: BrokerConfig) -> None:
        self.max_partitions = int(config.get("max.partitions"))
        self.max_broker_partitions = int(config.get("max.broker.partitions"))
        self.partitions = 0
        self.replicas_by_broker: Counter[int] = Counter()
        for _topic, partition in image.iter_partitions():
            self.partitions += 1
            self.replicas_by_broker.update(partition.replicas)

    def check_count(self, added: int) -> None:
        """Refuse `added` new partitions the cluster has no room for (before placing them)."""
        if self.partitions + added > self.max_partitions:
            raise KafkaError(
                ErrorCode.policy_violation,
                f"Adding {added} partition(s) would make {self.partitions + added} in the "
                f"cluster, above max.partitions={self.max_partitions}.",
            )

    def take(self, assignments: Sequence[Sequence[int]]) -> None:
        """Count placed partitions in, or refuse them if a broker would host too many."""
        self.check_count(len(assignments))
        added = Counter(broker_id for replicas in assignments for broker_id in replicas)
        for broker_id, count in sorted(added.items()):
            total = self.replicas_by_broker[broker_id] + count
            if total > self.max_broker_partitions:
                raise KafkaError(
                    ErrorCode.policy_violation,
                    f"Adding {len(assignments)} partition(s) would put {total} partition "
                    f"replicas on broker {broker_id}, above "
                    f"max.broker.partitions={self.max_broker_partitions}.",
                )
        self.partitions += len(assignments)
        self.replicas_by_broker.update(added)
