"""Seeded runs of one share-partition against a per-offset model: members fetch, acknowledge
(accept, release, reject, stale acknowledgements), leave and let their locks run out on a manual
clock while the log grows; the range-based state must agree with the model offset by offset
after every step, and at the end every deliverable record is accepted once or archived.

Replay a failing seed: MOLDAU_SIM_SEED=n pytest tests/simulation -k share_partition
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from moldau.clock import ManualClock, monotonic_ms
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    LogBatch,
    RecordState,
    SharePartition,
)
from tests.simulation.seeds import seeds

LOCK_MS = 1_000
MEMBERS = ("m0", "m1", "m2", "m3")


@dataclass
class Offset:
    """The model's view of one offset."""

    deliverable: bool
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    holder: str | None = None
    deadline: int = 0
    accepted: int = 0  # times accepted (must end at most 1)


@dataclass
class Run:
    seed: int
    rng: random.Random
    limit: int
    window: int
    log: list[LogBatch] = field(default_factory=list)
    model: dict[int, Offset] = field(default_factory=dict)
    high_watermark: int = 0
    clock: ManualClock = field(default_factory=ManualClock)

    def __post_init__(self) -> None:
        self.share = SharePartition(
            start_offset=0, delivery_count_limit=self.limit, max_in_flight_records=self.window
        )

    # --------------------------------------------------------------------------- the log

    def produce(self) -> None:
        """Append a batch (sometimes after a compacted-away gap, sometimes not deliverable)."""
        first = self.log[-1].last_offset + 1 if self.log else 0
        if self.rng.random() < 0.1:
            first += self.rng.randint(1, 3)  # offsets the log does not have
        last = first + self.rng.randint(0, 6)
        deliverable = self.rng.random() > 0.08
        self.log.append(LogBatch(first, last, deliverable))
        for offset in range(first, last + 1):
            self.model[offset] = Offset(deliverable)
        self.high_watermark = last + 1

    def read(self, offset: int) -> list[LogBatch]:
        """What a fetch at `offset` reads: a few batches from the one holding it."""
        found = [b for b in self.log if b.last_offset >= offset]
        return found[: self.rng.randint(1, 4)]

    # ------------------------------------------------------------------------ operations

    def now(self) -> int:
        return monotonic_ms(self.clock)

    def fetch(self, member: str) -> None:
        offset = self.share.next_fetch_offset()
        if offset is None:
            return
        deadline = self.now() + LOCK_MS
        max_records = self.rng.randint(1, 12)
        acquired = self.share.acquire(
            member, self.read(offset), max_records=max_records, lock_deadline_ms=deadline
        )
        redelivered = sum(
            1
            for run in acquired
            for offset in range(run.first_offset, run.last_offset + 1)
            if self.model[offset].delivery_count > 0
        )
        assert redelivered <= max_records, (redelivered, max_records)  # one by one, not batches
        for run in acquired:
            for offset in range(run.first_offset, run.last_offset + 1):
                record = self.model[offset]
                assert record.deliverable, offset
                assert offset < self.high_watermark, offset
                assert record.state == RecordState.AVAILABLE, (offset, record)
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                assert run.delivery_count == record.delivery_count, (offset, run, record)
                assert record.delivery_count <= self.limit, (offset, record)
                record.holder, record.deadline = member, deadline

    def held_runs(self, member: str) -> list[tuple[int, int]]:
        runs: list[tuple[int, int]] = []
        for offset in sorted(o for o, r in self.model.items() if r.holder == member):
            if runs and runs[-1][1] + 1 == offset:
                runs[-1] = (runs[-1][0], offset)
            else:
                runs.append((offset, offset))
        return runs

    def acknowledge(self, member: str) -> None:
        runs = self.held_runs(member)
        if not runs:
            return
        chosen = self.rng.sample(runs, self.rng.randint(1, len(runs)))
        batches = []
        for first, last in sorted(chosen):
            types = tuple(
                self.rng.choices(
                    [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT],
                    weights=[6, 3, 1],
                )[0]
                for _ in range(first, last + 1)
            )
            if self.rng.random() < 0.5:
                types = types[:1]
            batches.append(AcknowledgementBatch(first, last, tuple(int(t) for t in types)))
        self.share.acknowledge(member, batches)
        for batch in batches:
            for position, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                types = batch.acknowledge_types
                self.settle(offset, AcknowledgeType(types[position if len(types) > 1 else 0]))

    def settle(self, offset: int, ack_type: AcknowledgeType) -> None:
        record = self.model[offset]
        record.holder, record.deadline = None, 0
        if ack_type == AcknowledgeType.ACCEPT:
            record.state = RecordState.ACKNOWLEDGED
            record.accepted += 1
        elif ack_type == AcknowledgeType.REJECT or record.delivery_count >= self.limit:
            record.state = RecordState.ARCHIVED
        else:
            record.state = RecordState.AVAILABLE

    def stale_acknowledgement(self, member: str) -> None:
        """An acknowledgement of offsets the member does not hold is refused, changing nothing."""
        candidates = [o for o, r in self.model.items() if r.holder not in (member,)]
        if not candidates:
            return
        offset = self.rng.choice(candidates)
        before = self.share.state_batches()
        with pytest.raises(KafkaError) as refused:
            self.share.acknowledge(member, [AcknowledgementBatch(offset, offset, (1,))])
        assert refused.value.code == ErrorCode.invalid_record_state
        assert self.share.state_batches() == before

    def pass_time(self) -> None:
        self.clock.advance(self.rng.randint(0, LOCK_MS))
        now = self.now()
        expected = 0
        for offset, record in self.model.items():
            if record.state == RecordState.ACQUIRED and record.deadline <= now:
                self.settle(offset, AcknowledgeType.RELEASE)
                expected += 1
        assert self.share.expire_locks(now) == expected

    def leave(self, member: str) -> None:
        expected = 0
        for offset, record in self.model.items():
            if record.holder == member:
                self.settle(offset, AcknowledgeType.RELEASE)
                expected += 1
        assert self.share.release_member(member) == expected

    # ------------------------------------------------------------------------------ checks

    def check(self) -> None:
        self.share.check_invariants()
        start, end = self.share.start_offset, self.share.end_offset
        for offset, record in self.model.items():
            done = record.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
            if offset < start:
                assert done or not record.deliverable, (offset, record, start)
            elif offset < end:
                expected_state = record.state if record.deliverable else RecordState.ARCHIVED
                assert self.share.record_state(offset) == (expected_state, record.delivery_count), (
                    offset,
                    record,
                )
            else:
                assert record.state == RecordState.AVAILABLE and record.delivery_count == 0
        if start < end:  # the start offset rests on an offset that is not done
            state, _ = self.share.record_state(start) or (None, 0)
            assert state in (RecordState.AVAILABLE, RecordState.ACQUIRED), (start, state)

    def step(self) -> None:
        member = self.rng.choice(MEMBERS)
        action = self.rng.choices(
            ["produce", "fetch", "ack", "stale", "time", "leave"], weights=[3, 6, 5, 1, 2, 1]
        )[0]
        if action == "produce":
            self.produce()
        elif action == "fetch":
            self.fetch(member)
        elif action == "ack":
            self.acknowledge(member)
        elif action == "stale":
            self.stale_acknowledgement(member)
        elif action == "time":
            self.pass_time()
        else:
            self.leave(member)
        self.check()

    def drain(self) -> None:
        """Let every lock run out and accept whatever is delivered, until nothing is left."""
        for _ in range(10_000):
            self.clock.advance(LOCK_MS)
            self.pass_time()
            if (
                self.share.next_fetch_offset() is None
                and self.share.start_offset == self.share.end_offset
            ):
                break
            if self.share.start_offset == self.high_watermark:
                break
            self.fetch("drainer")
            for first, last in self.held_runs("drainer"):
                self.share.acknowledge("drainer", [AcknowledgementBatch(first, last, (1,))])
                for offset in range(first, last + 1):
                    self.settle(offset, AcknowledgeType.ACCEPT)
            self.check()
        assert self.share.start_offset == self.share.end_offset == self.high_watermark
        for offset, record in self.model.items():
            assert record.accepted <= 1, (offset, record)
            if record.deliverable:
                assert record.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED), offset
                assert record.accepted == 1 or record.state == RecordState.ARCHIVED, offset
                assert 1 <= record.delivery_count <= self.limit, (offset, record)


@pytest.mark.parametrize("window", [20, 2000])
def test_share_partition_agrees_with_a_per_offset_model(window: int) -> None:
    for seed in seeds(50):
        rng = random.Random(seed)
        run = Run(seed, rng, limit=rng.randint(2, 5), window=window)
        try:
            for _ in range(400):
                run.step()
            run.drain()
        except Exception as error:
            raise AssertionError(
                f"seed {seed} failed: {type(error).__name__}: {error}\n"
                f"replay: MOLDAU_SIM_SEED={seed} pytest tests/simulation -k share_partition"
            ) from error
