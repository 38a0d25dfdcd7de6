"""KIP-890's verification of transactional writes on a partition leader, Kafka's
`AddPartitionsToTxnManager`.

The first transactional batch of a producer on a partition is appended only once the partition
is in the producer's ongoing transaction: verified (part 1: AddPartitionsToTxn came first), or
added there by the leader itself (part 2, transaction version 2: Produce v12+ sends no
AddPartitionsToTxn). A late or zombie write thus cannot open a transaction that no EndTxn would
end. A batch of a producer whose transaction is already ongoing on the partition at its epoch
needs nothing.

The transaction coordinator is reached through a `CoordinatorLink` the node provides: answered at
once when this node coordinates the transactional id and only a verification is asked, else
asked (locally or of the coordinator's broker) with an await. Its answers are the coordinator's
own error codes; `produce_error` turns them into what a Produce answer carries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from moldau.protocol.batch_layout import HEADER_SIZE
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader
from moldau.replication.partition import Partition
from moldau.types import TopicPartition


class CoordinatorLink(Protocol):
    """How a leader reaches the transaction coordinator of a transactional id."""

    def verify_here(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode | None:
        """The coordinator's verification of `tp`, when this node coordinates the id (no
        await); None when it is coordinated elsewhere."""
        ...

    async def add_or_verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """Each partition's answer (NONE: in the producer's ongoing transaction, added there
        first with `add`), from the coordinator wherever it is."""
        ...


# What a producer is told to retry (Kafka: NOT_ENOUGH_REPLICAS, retriable for every client
# version), rather than a coordinator error a Produce answer cannot carry.
_RETRIABLE = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
        ErrorCode.request_timed_out,
    }
)


def produce_error(code: int) -> ErrorCode:
    """A coordinator's answer as a Produce answer carries it."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code in _RETRIABLE:
        return ErrorCode.not_enough_replicas
    return ErrorCode(code)


@dataclass(frozen=True, slots=True)
class PendingVerification:
    """A partition's batches held back until the coordinator answers for them."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int


def check(
    link: CoordinatorLink | None,
    partition: Partition | None,
    tp: TopicPartition,
    records: bytes | memoryview,
    transactional_id: str,
    *,
    add: bool,
) -> PendingVerification | None:
    """None when `records` may be appended now: not transactional, its producer's transaction
    already ongoing here at its epoch, or verified at once by this node's coordinator (raises
    KafkaError, as a Produce answer carries it, when refused). Otherwise what to ask the
    coordinator before appending (always with `add`: adding writes to the coordinator's log).
    Without a link (a node with no transaction coordinator) nothing is verified."""
    if link is None or len(records) < HEADER_SIZE:
        return None
    header = BatchHeader.parse(records)
    if not header.is_transactional:
        return None
    if partition is None or not partition.is_leader:
        return None  # (the append answers NOT_LEADER_OR_FOLLOWER)
    producer_id, producer_epoch = header.producer_id, header.producer_epoch
    entry = partition.log.producer_state.producers.get(producer_id)
    if (
        entry is not None
        and entry.current_txn_first_offset >= 0
        and entry.producer_epoch == producer_epoch
    ):
        return None
    if not add:
        answer = link.verify_here(transactional_id, producer_id, producer_epoch, tp)
        if answer is not None:
            code = produce_error(answer)
            if code != ErrorCode.none:
                raise KafkaError(
                    code, f"{tp} is not in the ongoing transaction of {transactional_id!r}"
                )
            return None
    return PendingVerification(tp, producer_id, producer_epoch)


async def verify(
    link: CoordinatorLink,
    transactional_id: str,
    pending: Sequence[PendingVerification],
    *,
    add: bool,
) -> dict[TopicPartition, ErrorCode]:
    """Ask the coordinator for every held-back partition (one call per producer and epoch);
    each partition's answer as a Produce answer carries it."""
    by_producer: dict[tuple[int, int], list[TopicPartition]] = {}
    for item in pending:
        by_producer.setdefault((item.producer_id, item.producer_epoch), []).append(item.tp)
    outcomes = await asyncio.gather(
        *(
            link.add_or_verify(transactional_id, producer_id, epoch, partitions, add=add)
            for (producer_id, epoch), partitions in by_producer.items()
        )
    )
    codes: dict[TopicPartition, ErrorCode] = {}
    for outcome in outcomes:
        codes.update((tp, produce_error(code)) for tp, code in outcome.items())
    return codes
