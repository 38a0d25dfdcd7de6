"""Offsets committed inside transactions (TxnOffsetCommit), pending until their transaction's marker
reaches `__consumer_offsets` (Kafka's pending transactional offsets of OffsetMetadataManager).

TxnOffsetCommit writes ordinary OffsetCommit records, but in a transactional batch of the
producer; they stay pending, invisible to OffsetFetch, until a COMMIT marker of that producer
makes them committed offsets or an ABORT marker drops them. While a partition has a pending
offset, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it (KIP-447).
Loading replays the same way: `TransactionalRecord`s are held back until their marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """A record of a transactional batch of `__consumer_offsets`, as the loader yields it."""

    producer_id: int
    producer_epoch: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """A COMMIT or ABORT control record of `__consumer_offsets`, as the loader yields it."""

    producer_id: int
    committed: bool


@dataclass(slots=True)
class PendingTransactionalOffsets:
    # producer id -> (group id, topic, partition) -> the offset written in its transaction
    by_producer: dict[int, dict[tuple[str, str, int], CoordinatorRecord]] = field(
        default_factory=dict
    )
    # (group id, topic, partition) -> producers with a pending offset for it
    producers_of: dict[tuple[str, str, int], set[int]] = field(default_factory=dict)

    def add(self, producer_id: int, record: CoordinatorRecord) -> None:
        key = record.key
        assert isinstance(key, OffsetCommitKey)
        where = (key.group_id, key.topic, key.partition)
        self.by_producer.setdefault(producer_id, {})[where] = record
        self.producers_of.setdefault(where, set()).add(producer_id)

    def complete(self, producer_id: int, committed: bool) -> list[CoordinatorRecord]:
        """Drop the producer's pending offsets; the committed ones are returned for replay."""
        pending = self.by_producer.pop(producer_id, {})
        for where in pending:
            producers = self.producers_of.get(where)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.producers_of[where]
        if not committed:
            return []
        return [
            record for record in pending.values() if isinstance(record.value, OffsetCommitValue)
        ]

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return (group_id, topic, partition) in self.producers_of

    def has_pending_for_group(self, group_id: str) -> bool:
        return any(where[0] == group_id for where in self.producers_of)
