"""What the data path counts (Kafka's BrokerTopicStats and the ReplicaManager's ISR meters), as
plain integers: an append or a fetch adds to a field and takes no lock, and nothing here knows
how it is exported (`moldau.broker.observability` reads the fields when it is scraped).

- `TopicTraffic` per topic: records and bytes appended as leader (a producer's batches and a
  coordinator's, transaction markers included, as Kafka counts them; an idempotent retry of a
  batch already in the log is not counted), and bytes of records answered to consumers (not to
  followers).
- ISR shrinks and expands: each change of a led partition's ISR within one leadership that
  removed (or added) a member, whether this leader proposed it or the controller made it.
- acks=all produces waiting for replication and their fsync, and the partitions they wait on.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field


@dataclass(slots=True)
class TopicTraffic:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(slots=True)
class ReplicationStats:
    topics: dict[str, TopicTraffic] = field(default_factory=dict)
    isr_shrinks: int = 0
    isr_expands: int = 0
    delayed_produces: int = 0  # acks=all requests waiting
    delayed_produce_partitions: int = 0  # the partitions they wait on, one per request each

    def traffic(self, topic: str) -> TopicTraffic:
        traffic = self.topics.get(topic)
        if traffic is None:
            traffic = self.topics[topic] = TopicTraffic()
        return traffic

    def isr_changed(self, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        if not set(old) <= set(new):
            self.isr_shrinks += 1
        if not set(new) <= set(old):
            self.isr_expands += 1

    def forget_topics_except(self, existing: Container[str]) -> None:
        """Drop the counters of topics that no longer exist (Kafka removes a deleted topic's
        metrics); a topic made again under the same name counts from zero."""
        for topic in [topic for topic in self.topics if topic not in existing]:
            del self.topics[topic]
