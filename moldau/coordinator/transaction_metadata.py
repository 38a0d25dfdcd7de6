"""The state of one transactional id (Kafka's TransactionMetadata), the coordinator's settings and
what a transaction operation returns.

`TransactionMetadata` is rebuilt only from `__transaction_state` records (`apply`): the producer
id and epoch, the timeout, the state, the partitions of the open transaction and its timestamps.
`last_producer_epoch` (the epoch before the latest bump, for retried requests) is derived while
replaying, as it is not in the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from moldau.coordinator.transaction_records import (
    TopicPartitions,
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
)
from moldau.protocol.errors import ErrorCode
from moldau.types import TopicPartition

MAX_PRODUCER_EPOCH = 32767
"""Kafka's Short.MAX_VALUE: an epoch at MAX - 1 cannot be bumped again; a new id is needed."""

TRANSACTION_VERSION_2 = 2
"""KIP-890 part 2: the epoch is bumped at the end of every transaction (EndTxn v5+)."""

TransactionRecord = tuple[TransactionLogKey, TransactionLogValue | None]


class PropertySource(Protocol):
    def get(self, name: str) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionCoordinatorConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000

    @classmethod
    def from_properties(cls, properties: PropertySource) -> TransactionCoordinatorConfig:
        """Read the `transaction.*` and `transactional.id.*` broker properties."""

        def number(name: str, default: int) -> int:
            try:
                value = properties.get(name)
            except KeyError:
                return default
            return default if value is None else int(value)

        defaults = cls()
        return cls(
            transaction_state_log_num_partitions=number(
                "transaction.state.log.num.partitions",
                defaults.transaction_state_log_num_partitions,
            ),
            transaction_max_timeout_ms=number(
                "transaction.max.timeout.ms", defaults.transaction_max_timeout_ms
            ),
            transactional_id_expiration_ms=number(
                "transactional.id.expiration.ms", defaults.transactional_id_expiration_ms
            ),
            remove_expired_transactional_ids_interval_ms=number(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                defaults.remove_expired_transactional_ids_interval_ms,
            ),
        )


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    last_producer_epoch: int = -1
    client_transaction_version: int = 0

    @classmethod
    def from_value(
        cls, transactional_id: str, value: TransactionLogValue, previous: TransactionMetadata | None
    ) -> TransactionMetadata:
        last_epoch = -1
        if previous is not None:
            same_producer = previous.producer_id == value.producer_id
            if same_producer and value.producer_epoch > previous.producer_epoch:
                last_epoch = previous.producer_epoch
            elif same_producer:
                last_epoch = previous.last_producer_epoch
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            transaction_timeout_ms=value.transaction_timeout_ms,
            state=value.state,
            partitions={
                TopicPartition(topic, partition)
                for topic, partitions in value.partitions
                for partition in partitions
            },
            start_timestamp_ms=value.start_timestamp_ms,
            last_update_timestamp_ms=value.last_update_timestamp_ms,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            last_producer_epoch=last_epoch,
            client_transaction_version=value.client_transaction_version,
        )

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.transaction_timeout_ms,
            state=self.state,
            partitions=group_partitions(self.partitions),
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    def copy(self, **changes: Any) -> TransactionMetadata:
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields["partitions"] = set(self.partitions)
        fields.update(changes)
        return TransactionMetadata(**fields)


def group_partitions(partitions: set[TopicPartition]) -> TopicPartitions:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple((topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items()))


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerRequest:
    """Write COMMIT or ABORT markers to `partitions`, then complete the transaction
    (Kafka's TransactionMarkerChannelManager work for one transaction)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]
    transaction_version: int = 0


@dataclass(slots=True)
class TransactionResult:
    """Records to append to the partition of `__transaction_state`, then the response; markers
    to write once the records are durable. `needs_producer_id`: call again with a fresh id."""

    records: list[TransactionRecord] = field(default_factory=list)
    response: dict[str, Any] = field(default_factory=dict)
    markers: list[MarkerRequest] = field(default_factory=list)
    needs_producer_id: bool = False

    def merge(self, other: TransactionResult) -> None:
        self.records.extend(other.records)
        self.markers.extend(other.markers)


def error_result(code: ErrorCode, **response: Any) -> TransactionResult:
    return TransactionResult(response={"error_code": code, **response})
