"""A partition replica hosted by this broker: its role, leader epoch, ISR and high watermark.

Mirrors Kafka's `Partition`. As leader it accepts appends (checking `min.insync.replicas` for
acks=all), answers fetches bounded by the high watermark (read_uncommitted) or the last stable
offset (read_committed), serves its followers' fetches up to its log end, and advances the high
watermark to the smallest log end offset of the (maximal) ISR as they report it (a
`ReplicaTracker`). As follower it appends what its fetcher brings from the leader, its high
watermark never past the leader's nor its own log end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_tracker import ReplicaTracker
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
    epoch_start_offset: int = 0  # the log end offset when this leadership began
    tracker: ReplicaTracker = field(default_factory=lambda: ReplicaTracker(local_id=-1))

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_node_id

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the error a client should see if this replica may not serve as leader. The
        epoch comes first, as in Kafka: a request naming a newer epoch than this replica knows
        gets UNKNOWN_LEADER_EPOCH (this broker has not caught up with the metadata yet: retry
        soon), even where this replica is not leader yet."""
        self.check_epoch(current_leader_epoch)
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)

    def become_leader(self, *, now_ms: int) -> None:
        """A new leadership (a new leader epoch): the followers' progress starts afresh."""
        self.epoch_start_offset = self.log.log_end_offset
        self.tracker.local_id = self.local_node_id
        self.tracker.reset(
            replicas=self.replicas,
            isr=self.isr,
            now_ms=now_ms,
            log_end_offset=self.epoch_start_offset,
        )

    def replicas_changed(self, *, now_ms: int) -> None:
        """The replicas changed within this leadership (a reassignment, KIP-455): followers
        that stay keep their progress, new ones start unknown; the epoch start stays."""
        self.tracker.reset(
            replicas=self.replicas,
            isr=self.isr,
            now_ms=now_ms,
            log_end_offset=self.log.log_end_offset,
        )

    def record_follower_fetch(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        now_ms: int,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> bool:
        """A follower fetched from `fetch_offset` (its durable log end); True if the high
        watermark moved. KafkaError if `replica_id` is no replica of this partition."""
        state = self.tracker.record_fetch(
            replica_id,
            fetch_offset=fetch_offset,
            leader_end_offset=self.log.log_end_offset,
            now_ms=now_ms,
            broker_epoch=broker_epoch,
            log_start_offset=log_start_offset,
        )
        if state is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {replica_id} is not a replica of {self.topic_partition}",
            )
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """Move the high watermark to the minimum log end offset of the ISR; True if it moved.
        It never goes backwards (a smaller ISR minimum leaves it where it is)."""
        new_high_watermark = self.tracker.high_watermark(self.log.log_end_offset)
        if new_high_watermark > self.log.high_watermark:
            self.log.update_high_watermark(new_high_watermark)
            return True
        return False

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark: the leader's, but never past what it holds itself."""
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
