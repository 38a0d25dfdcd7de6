"""A partition replica hosted by this broker: its role, leader epoch, ISR and high watermark.

Mirrors Kafka's `Partition`: the leader accepts appends (checking `min.insync.replicas` for
acks=all), advances the high watermark to the smallest log end offset in the ISR, and answers
fetches bounded by the high watermark (read_uncommitted) or the last stable offset
(read_committed). With a single replica the ISR is the leader alone, so the high watermark
follows the log end offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage import PartitionLog
from moldau.types import TopicPartition


@dataclass(slots=True)
class Partition:
    topic_partition: TopicPartition
    log: PartitionLog
    topic_id: object = None
    leader_id: int = -1
    leader_epoch: int = 0
    partition_epoch: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    local_node_id: int = -1
    follower_end_offsets: dict[int, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_node_id

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the error a client should see if this replica may not serve as leader."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)

    def maybe_advance_high_watermark(self) -> bool:
        """Move the high watermark to the minimum log end offset of the ISR; True if it moved."""
        end_offsets = [self.log.log_end_offset]
        for replica in self.isr:
            if replica != self.local_node_id:
                end_offsets.append(self.follower_end_offsets.get(replica, 0))
        new_high_watermark = min(end_offsets)
        if new_high_watermark > self.log.high_watermark:
            self.log.update_high_watermark(new_high_watermark)
            return True
        return False
