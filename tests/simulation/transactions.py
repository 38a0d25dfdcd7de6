"""Transactions and a read_committed consumer in the data-path simulation (replication.py).

`TransactionalWriter` is a transactional producer with its coordinator folded in: each
transaction takes a new producer epoch (as transaction version 2 bumps it), writes one to three
batches to the partition's leader with `ReplicaManager.append_records`, each acknowledged
(replicated and durable: acks=all) before the next, then a COMMIT marker, or an ABORT marker when
a batch's outcome is lost (its leader changed or refused it) or at random. A marker is appended
with `AppendOrigin.COORDINATOR` to whichever broker leads and written again on the next leader
until one is acknowledged, as the coordinator retries WriteTxnMarkers.

`CommittedReader` is a consumer at read_committed reading through `ReplicaManager.fetch` (the
broker's own consumer read path) from a random broker each time, leader or follower (Fetch v11+
reads followers), and dropping aborted transactions' records as a client does, from the
answer's aborted transactions and the ABORT markers it reads.

Checked after every read: no batch at or past the last stable offset the answer gave, records in
offset order, never one twice. Checked at the end: every record read belongs to a committed
transaction (or to the plain producer), and reading everything again gives exactly what was
committed and acknowledged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.protocol.errors import KafkaError
from moldau.protocol.records import (
    BatchHeader,
    ControlRecordType,
    NewRecord,
    build_batch,
    build_control_batch,
    iter_batches,
    parse_control_record,
)
from moldau.replication.consumer_fetch import READ_COMMITTED, ConsumerFetchParams, PartitionFetch
from moldau.storage import AppendOrigin
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from tests.simulation.replication import ReplicationSimulation, SimBroker


class InvariantViolation(AssertionError):
    """A broken invariant of the data-path simulation (this module's and replication.py's)."""


PRODUCER_ID = 4242
READ_BYTES = 4096


@dataclass
class _Transaction:
    epoch: int
    values: list[bytes]
    batches_left: int
    sequence: int = 0
    abort: bool = False
    waiting: tuple[int, int, int, list[bytes]] | None = None  # (broker, leader epoch, last, values)
    marker: tuple[int, int, int] | None = None  # (broker, leader epoch, offset) of the marker
    ending: bool = False


@dataclass
class TransactionalWriter:
    sim: ReplicationSimulation
    tp: TopicPartition
    epoch: int = 0
    next_value: int = 0
    current: _Transaction | None = None
    committed: set[bytes] = field(default_factory=set)
    aborted: set[bytes] = field(default_factory=set)
    transactions: int = 0

    @property
    def rng(self) -> random.Random:
        return self.sim.rng

    def step(self, *, begin: bool) -> None:
        if self.current is None:
            if begin and self.rng.random() < 0.3:
                self.epoch += 1
                self.current = _Transaction(self.epoch, [], self.rng.randint(1, 3))
            return
        txn = self.current
        if txn.ending:
            self._end(txn)
        elif txn.waiting is not None:
            self._await_batch(txn)
        elif txn.batches_left == 0 or txn.abort:
            txn.ending = True
            if not txn.abort and self.rng.random() < 0.15:
                txn.abort = True  # the application aborts
            self._end(txn)
        else:
            self._write_batch(txn)

    def _leader(self) -> SimBroker | None:
        leader = self.sim.controller.leader
        broker = self.sim.brokers.get(leader)
        if broker is None or broker.manager is None or broker.partition is None:
            return None
        return broker if broker.partition.is_leader else None

    def _write_batch(self, txn: _Transaction) -> None:
        broker = self._leader()
        if broker is None:
            return
        assert broker.manager is not None
        values = [b"t%06d" % (self.next_value + i) for i in range(self.rng.randint(1, 3))]
        self.next_value += len(values)
        batch = build_batch(
            [NewRecord(value=v) for v in values],
            producer_id=PRODUCER_ID,
            producer_epoch=txn.epoch,
            base_sequence=txn.sequence,
            transactional=True,
        )
        try:
            result = broker.manager.append_records(self.tp, batch, required_acks=-1)
        except KafkaError:
            txn.abort = True  # (nothing appended)
            return
        txn.values.extend(values)
        txn.sequence += len(values)
        txn.batches_left -= 1
        epoch = broker.partition.leader_epoch
        txn.waiting = (broker.broker_id, epoch, int(result.last_offset), values)

    def _acknowledged(self, broker_id: int, epoch: int, offset: int) -> bool | None:
        """True once `offset` is replicated and durable on the leader that took it; None if
        that leadership ended first (the outcome is lost)."""
        broker = self.sim.brokers[broker_id]
        partition = broker.partition
        if partition is None or not partition.is_leader or partition.leader_epoch != epoch:
            return None
        log = partition.log
        return log.high_watermark > offset and log.recovery_point > offset

    def _await_batch(self, txn: _Transaction) -> None:
        assert txn.waiting is not None
        broker_id, epoch, last, _values = txn.waiting
        acknowledged = self._acknowledged(broker_id, epoch, last)
        if acknowledged is None:
            txn.waiting = None
            txn.abort = True
        elif acknowledged:
            txn.waiting = None

    def _end(self, txn: _Transaction) -> None:
        if txn.marker is not None:
            acknowledged = self._acknowledged(*txn.marker)
            if acknowledged:
                (self.aborted if txn.abort else self.committed).update(txn.values)
                self.transactions += 1
                self.current = None
                return
            if acknowledged is False:
                return
            txn.marker = None  # its leadership ended: write it again on the next leader
        broker = self._leader()
        if broker is None:
            return
        assert broker.manager is not None
        marker = build_control_batch(
            ControlRecordType.ABORT if txn.abort else ControlRecordType.COMMIT,
            producer_id=PRODUCER_ID,
            producer_epoch=txn.epoch,
        )
        try:
            result = broker.manager.append_records(
                self.tp, marker, required_acks=1, origin=AppendOrigin.COORDINATOR
            )
        except KafkaError:
            return
        txn.marker = (broker.broker_id, broker.partition.leader_epoch, int(result.last_offset))


@dataclass
class CommittedReader:
    sim: ReplicationSimulation
    tp: TopicPartition
    position: int = 0
    read: dict[bytes, int] = field(default_factory=dict)  # value -> offset
    # The Java consumer's bookkeeping: aborted transactions not reached yet (first offset,
    # producer id), and the producers inside an aborted transaction at the position.
    aborted_ahead: list[tuple[int, int]] = field(default_factory=list)
    aborting: set[int] = field(default_factory=set)
    reads: int = 0

    def step(self) -> None:
        broker = self.sim.brokers[self.sim.rng.choice(list(self.sim.brokers))]
        if broker.manager is None or broker.partition is None:
            return
        answers = broker.manager.fetch(
            [PartitionFetch(self.tp, self.tp.partition, self.position, READ_BYTES)],
            ConsumerFetchParams(
                isolation_level=READ_COMMITTED,
                max_bytes=READ_BYTES,
                min_bytes=0,
                max_wait_ms=0,
                allow_follower=True,
            ),
            lambda _answers: None,
        )
        assert answers is not None  # (max_wait_ms 0: answered at once)
        [answer] = answers
        if answer.error_code:
            return
        self.reads += 1
        for producer_id, first_offset in answer.aborted_transactions or ():
            if first_offset >= self.position and (first_offset, producer_id) not in (
                self.aborted_ahead
            ):
                self.aborted_ahead.append((first_offset, producer_id))
        self.aborted_ahead.sort()
        data = b"".join(region.read_bytes() for region in answer.records)
        for batch in iter_batches(data):
            self._consume(batch.header, batch, answer.last_stable_offset)

    def _consume(self, header: BatchHeader, batch: Any, last_stable_offset: int) -> None:
        if header.last_offset < self.position:
            return  # (a batch that starts before the position: read again)
        if header.last_offset >= last_stable_offset:
            raise InvariantViolation(
                f"read_committed returned a batch ending at {header.last_offset}, at or past "
                f"the last stable offset {last_stable_offset}"
            )
        self.position = header.last_offset + 1
        while self.aborted_ahead and self.aborted_ahead[0][0] <= header.last_offset:
            self.aborting.add(self.aborted_ahead.pop(0)[1])
        if header.is_control:
            control, _ = parse_control_record(batch.records()[0])
            if control is ControlRecordType.ABORT:
                self.aborting.discard(header.producer_id)  # that aborted transaction ends here
            return
        if header.is_transactional and header.producer_id in self.aborting:
            return  # an aborted transaction's records
        for record in batch.records():
            if record.value in self.read:
                raise InvariantViolation(
                    f"{record.value!r} read at offset {record.offset} and at "
                    f"{self.read[record.value]}"
                )
            self.read[record.value] = record.offset

    def check_final(self, writer: TransactionalWriter, acknowledged: dict[bytes, int]) -> None:
        """Everything read was committed, and reading from the start now gives exactly the
        committed transactions and the acknowledged plain records."""
        for value, offset in self.read.items():
            if value.startswith(b"t") and value not in writer.committed:
                state = "aborted" if value in writer.aborted else "never committed"
                raise InvariantViolation(f"read_committed read {value!r} at {offset}: {state}")
        again = CommittedReader(self.sim, self.tp)
        for _ in range(10_000):
            before = again.position
            again.step()
            leader = self.sim.brokers[self.sim.controller.leader].partition
            if again.position == before and again.position >= leader.log.last_stable_offset:
                break
        transactional = {v for v in again.read if v.startswith(b"t")}
        if transactional != writer.committed:
            missing = sorted(writer.committed - transactional)[:5]
            extra = sorted(transactional - writer.committed)[:5]
            raise InvariantViolation(
                f"read_committed from the start: missing committed {missing}, extra {extra}"
            )
        plain = {v for v in again.read if not v.startswith(b"t")}
        if not set(acknowledged) <= plain:
            raise InvariantViolation(
                f"read_committed from the start misses acknowledged records "
                f"{sorted(set(acknowledged) - plain)[:5]}"
            )
