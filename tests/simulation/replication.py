"""A deterministic simulation of one partition's data path: three brokers replicating a
partition (replication factor 3, min.insync.replicas 2) while they crash (losing what they had
not fsynced, sometimes with a torn tail), restart, lose messages, learn metadata late and lose
contact with the controller while still serving (a zombie leader), under one seeded random
source and a manual clock.

What runs is Moldau's own code: each broker is a `ReplicaManager` over a `LogManager` on an
in-memory file system that can crash; leaders answer followers with `read_for_follower`,
followers apply answers with the fetcher's `apply_fetched`, leaders propose ISR changes and
settle them as the node does. The controller is a small model of Kafka's rules (the real one is
simulated in leadership.py): fence a broker that stops heartbeating (out of the ISR, a new leader
from the ISR with a new leader epoch), accept an AlterPartition only from the leader in its
current epochs and only with unfenced brokers added, elect again when an ISR member returns to a
leaderless partition.

A producer sends batches of unique values with acks=all to the broker it believes leads; a leader
acknowledges a batch once it is below the high watermark and fsynced there (Moldau's acks=all),
and the acknowledgement can be lost on its way back.

A transactional producer writes beside it and a read_committed consumer reads through the
broker's own consumer read path (`ReplicaManager.fetch`), from leaders and followers
(transactions.py).

Checked after every step:
- one leader epoch never has two brokers appending as leader;
- a leader's high watermark never goes down while it leads in one epoch;
- read_committed returns nothing at or past the last stable offset, in offset order, once;
and once every fault heals and the replicas caught up:
- every acknowledged value is in the log, once, at the offset it was acknowledged with;
- the replicas are byte for byte identical;
- everything read_committed returned was committed, and a read from the start returns exactly
  the committed transactions and every acknowledged record.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import NewRecord, build_batch, iter_batches
from moldau.replication.fetcher import apply_fetched
from moldau.replication.replica_manager import PartitionState, ReplicaManager
from moldau.storage import LogConfig, LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition
from tests.simulation.transactions import (
    CommittedReader,
    InvariantViolation,
    TransactionalWriter,
)

TP = TopicPartition("events", 0)
TOPIC_ID = uuid.UUID(int=7)
BROKERS = (1, 2, 3)
MIN_INSYNC = 2
LAG_MAX_MS = 3_000
SESSION_MS = 2_000
STEP_MS = 50
HEAL_STEPS = 400
# Small segments and indexes: rolls happen, and a run holds kilobytes, not preallocated megabytes.
CONFIG = LogConfig(min_insync_replicas=MIN_INSYNC, segment_bytes=4096, segment_index_bytes=4096)
DATA_DIR = "/data"


@dataclass
class Message:
    deliver_at: int  # step
    source: int  # broker id, 0 for the producer
    target: int
    kind: str
    body: dict[str, Any]


@dataclass
class ControllerState:
    leader: int = 1
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = BROKERS
    version: int = 0
    fenced: set[int] = field(default_factory=set)
    incarnations: dict[int, int] = field(default_factory=dict)  # registered incarnation
    last_heartbeat: dict[int, int] = field(default_factory=dict)

    def as_state(self) -> PartitionState:
        return PartitionState(
            topic_id=TOPIC_ID,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            replicas=BROKERS,
            isr=self.isr,
        )


class SimBroker:
    def __init__(self, broker_id: int, sim: ReplicationSimulation) -> None:
        self.broker_id = broker_id
        self.sim = sim
        self.filesystem = MemoryFileSystem()
        self.alive = False
        self.isolated_until = -1  # cut off from the controller (still serving) until this step
        self.down_until = 0  # crashed: restarts at this step
        self.incarnation = 0
        self.known_version = -1
        self.fetch_in_flight = False
        self.fetch_sent_at = -1
        self.fetch_number = 0  # only the answer to the latest fetch counts (one connection)
        self.alter_sent_at = -1
        self.acks: list[tuple[int, int, list[bytes], int]] = []  # (last offset, epoch, values, id)
        self.manager: ReplicaManager | None = None
        self.start()

    def start(self) -> None:
        logs = LogManager(
            [DATA_DIR],
            fs=self.filesystem,
            clock=self.sim.clock,
            default_config=CONFIG,
            recovery_threads=1,
        )
        logs.startup()
        manager = ReplicaManager(
            logs,
            node_id=self.broker_id,
            clock=self.sim.clock,
            replica_lag_time_max_ms=LAG_MAX_MS,
        )
        manager.on_isr_change = self._propose
        manager.active_brokers = self.sim.unfenced
        self.manager = manager
        self.incarnation += 1
        self.alive = True
        self.known_version = -1
        self.fetch_in_flight = False
        self.acks = []

    def crash(self, *, tear: bool) -> None:
        self.alive = False
        self.manager = None
        self.filesystem.crash(tear=tear, rng=self.sim.rng)

    @property
    def partition(self) -> Any:
        return self.manager.partitions.get(TP) if self.manager is not None else None

    def learn(self, state: ControllerState) -> None:
        assert self.manager is not None
        self.manager.become_leader_or_follower(TP, state.as_state(), CONFIG)
        self.known_version = state.version
        partition = self.partition
        if not partition.is_leader:
            self.fail_acks()

    def fail_acks(self) -> None:
        for _last, _epoch, values, request_id in self.acks:
            self.sim.producer_outcome(request_id, values, None)
        self.acks = []

    def _propose(self, tp: TopicPartition, partition: Any, change: Any) -> None:
        self.alter_sent_at = self.sim.step_number
        self.sim.send(
            self.broker_id,
            0,
            "alter_partition",
            {
                "leader_epoch": partition.leader_epoch,
                "partition_epoch": partition.partition_epoch,
                "isr": change.new_isr,
            },
        )


class ReplicationSimulation:
    def __init__(self, seed: int, *, steps_between_faults: int = 60) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.step_number = 0
        self.controller = ControllerState()
        self.network: list[Message] = []
        self.steps_between_faults = steps_between_faults
        self.brokers = {b: SimBroker(b, self) for b in BROKERS}
        for broker in self.brokers.values():
            broker.learn(self.controller)
        self.next_value = 0
        self.next_request = 0
        self.producer_view = self.controller.leader
        self.in_flight_produce = 0
        self.acked: dict[bytes, int] = {}  # value -> offset acknowledged
        self.pending: dict[int, list[bytes]] = {}
        self.sent_at: dict[int, int] = {}  # request id -> step (a request times out)
        self.leaders_by_epoch: dict[int, int] = {}
        # (broker, incarnation, leader epoch) -> the high watermark last seen there
        self.high_watermarks: dict[tuple[int, int, int], int] = {}
        self.events: deque[str] = deque(maxlen=40)
        self.faults = 0
        self.elections = 0
        self.writer = TransactionalWriter(self, TP)
        self.reader = CommittedReader(self, TP)

    # --- plumbing --------------------------------------------------------------------------

    def log(self, text: str) -> None:
        self.events.append(f"[{self.step_number}] {text}")

    def unfenced(self) -> set[int]:
        return set(BROKERS) - self.controller.fenced

    def send(self, source: int, target: int, kind: str, body: dict[str, Any]) -> None:
        if self.rng.random() < 0.05:
            return  # lost
        delay = self.rng.choice((0, 1, 1, 2, 3, 6))
        self.network.append(Message(self.step_number + delay, source, target, kind, body))

    def reachable(self, broker_id: int) -> bool:
        broker = self.brokers[broker_id]
        return broker.alive

    def controller_reaches(self, broker_id: int) -> bool:
        broker = self.brokers[broker_id]
        return broker.alive and broker.isolated_until < self.step_number

    # --- the run ---------------------------------------------------------------------------

    def run(self, steps: int) -> ReplicationSimulation:
        for _ in range(steps):
            self.step(faults=True)
        self.heal()
        return self

    def step(self, *, faults: bool) -> None:
        self.step_number += 1
        self.clock.advance(STEP_MS)
        if faults and self.rng.random() < 1 / self.steps_between_faults:
            self.inject_fault()
        self.restart_some()
        self.deliver()
        self.run_controller()
        for broker in self.brokers.values():
            if broker.alive:
                self.run_broker(broker)
        if faults:
            self.produce()
        else:
            self.expire_requests()
        self.writer.step(begin=faults)
        if self.rng.random() < 0.3:
            self.reader.step()
        self.check_step()

    def inject_fault(self) -> None:
        victim = self.brokers[self.rng.choice(BROKERS)]
        if not victim.alive:
            return
        self.faults += 1
        kind = self.rng.choice(("crash", "crash", "torn", "isolate"))
        if kind == "isolate":
            victim.isolated_until = self.step_number + self.rng.randint(20, 120)
            self.log(f"broker {victim.broker_id} cut off from the controller")
            return
        self.log(f"broker {victim.broker_id} crashes ({kind})")
        victim.fail_acks()
        victim.crash(tear=kind == "torn")
        victim.down_until = self.step_number + self.rng.randint(5, 80)

    def restart_some(self) -> None:
        for broker in self.brokers.values():
            if not broker.alive and broker.down_until <= self.step_number:
                broker.start()
                self.log(f"broker {broker.broker_id} restarts")

    def deliver(self) -> None:
        due = [m for m in self.network if m.deliver_at <= self.step_number]
        self.network = [m for m in self.network if m.deliver_at > self.step_number]
        self.rng.shuffle(due)
        for message in due:
            if message.target == 0 and message.kind == "alter_partition":
                if self.controller_reaches(message.source):
                    self.alter_partition(message.source, message.body)
            elif message.target == -1:
                self.producer_answer(message)
            else:
                target = self.brokers[message.target]
                if not target.alive or target.manager is None:
                    continue
                if message.kind == "fetch":
                    self.answer_fetch(target, message)
                elif message.kind == "fetched":
                    self.apply_answer(target, message)
                elif message.kind == "produce":
                    self.handle_produce(target, message)
                elif message.kind == "alter_partition_answer":
                    self.settle_alter_partition(target, message.body)

    # --- the controller ----------------------------------------------------------------------

    def run_controller(self) -> None:
        state = self.controller
        for broker_id in BROKERS:
            if self.controller_reaches(broker_id):
                incarnation = self.brokers[broker_id].incarnation
                if state.incarnations.setdefault(broker_id, incarnation) != incarnation:
                    # It registers again: its old incarnation is fenced first (it may have
                    # lost what it had not fsynced), the new one unfenced once caught up.
                    state.incarnations[broker_id] = incarnation
                    if broker_id not in state.fenced:
                        self.fence(broker_id)
                state.last_heartbeat[broker_id] = self.step_number
                if broker_id in state.fenced and self.brokers[broker_id].known_version >= 0:
                    state.fenced.discard(broker_id)  # registered again, caught up
                    self.log(f"controller unfences {broker_id}")
                    if state.leader < 0 and broker_id in state.isr:
                        self.elect(broker_id)
            elif (
                broker_id not in state.fenced
                and (self.step_number - state.last_heartbeat.get(broker_id, 0)) * STEP_MS
                > SESSION_MS
            ):
                self.fence(broker_id)
        for broker in self.brokers.values():  # metadata reaches the brokers, some late
            if (
                self.controller_reaches(broker.broker_id)
                and broker.known_version < state.version
                and self.rng.random() < 0.4
            ):
                broker.learn(state)

    def fence(self, broker_id: int) -> None:
        state = self.controller
        state.fenced.add(broker_id)
        self.log(f"controller fences {broker_id}")
        if len(state.isr) > 1 and broker_id in state.isr:
            state.isr = tuple(b for b in state.isr if b != broker_id)
            self.change()
        if state.leader == broker_id:
            candidates = [b for b in state.isr if b not in state.fenced]
            self.elect(candidates[0] if candidates else -1)

    def elect(self, leader: int) -> None:
        state = self.controller
        state.leader = leader
        state.leader_epoch += 1
        self.elections += 1
        self.log(f"controller elects {leader} in epoch {state.leader_epoch}, ISR {state.isr}")
        self.change()

    def change(self) -> None:
        self.controller.partition_epoch += 1
        self.controller.version += 1

    def alter_partition(self, source: int, body: dict[str, Any]) -> None:
        state = self.controller
        accepted = (
            source == state.leader
            and body["leader_epoch"] == state.leader_epoch
            and body["partition_epoch"] == state.partition_epoch
            and all(b not in state.fenced for b in body["isr"] if b not in state.isr)
            and source in body["isr"]
        )
        if accepted:
            state.isr = tuple(body["isr"])
            self.change()
            self.log(f"controller accepts ISR {state.isr} from {source}")
        self.send(
            0,
            source,
            "alter_partition_answer",
            {
                "isr": state.isr if accepted else None,
                "leader_epoch": state.leader_epoch,
                "partition_epoch": state.partition_epoch,
            },
        )

    def settle_alter_partition(self, broker: SimBroker, body: dict[str, Any]) -> None:
        assert broker.manager is not None
        broker.manager.isr_change_settled(
            TP,
            isr=body["isr"],
            leader_epoch=body["leader_epoch"],
            partition_epoch=body["partition_epoch"],
        )

    # --- brokers -----------------------------------------------------------------------------

    def run_broker(self, broker: SimBroker) -> None:
        partition = broker.partition
        if partition is None:
            return
        manager = broker.manager
        assert manager is not None
        if self.rng.random() < 0.5:
            partition.log.flush()
        if partition.is_leader:
            if (
                partition.tracker.pending is not None
                and self.step_number - broker.alter_sent_at > 20
            ):
                manager.isr_change_settled(  # the AlterPartition call timed out
                    TP,
                    isr=None,
                    leader_epoch=partition.leader_epoch,
                    partition_epoch=partition.partition_epoch,
                )
            manager.check_isr()
            self.complete_acks(broker)
            return
        stale = self.step_number - broker.fetch_sent_at > 10
        if partition.leader_id > 0 and (not broker.fetch_in_flight or stale):
            partition.log.flush()  # followers report only what they fsynced
            log_ = partition.log
            broker.fetch_in_flight = True
            broker.fetch_sent_at = self.step_number
            broker.fetch_number += 1
            self.send(
                broker.broker_id,
                partition.leader_id,
                "fetch",
                {
                    "fetch_offset": log_.log_end_offset,
                    "last_fetched_epoch": log_.leader_epoch_cache.latest_epoch,
                    "current_leader_epoch": partition.leader_epoch,
                    "log_start_offset": log_.log_start_offset,
                    "number": broker.fetch_number,
                },
            )

    def answer_fetch(self, leader: SimBroker, message: Message) -> None:
        assert leader.manager is not None
        body = message.body
        read = leader.manager.read_for_follower(
            TP,
            message.source,
            fetch_offset=body["fetch_offset"],
            last_fetched_epoch=body["last_fetched_epoch"],
            current_leader_epoch=body["current_leader_epoch"],
            max_bytes=2048,
            min_one_message=True,
            log_start_offset=body["log_start_offset"],
        )
        records = b"".join(r.read_bytes() for r in read.records) if read.records else b""
        diverging = (
            SimpleNamespace(epoch=read.diverging_epoch[0], end_offset=read.diverging_epoch[1])
            if read.diverging_epoch
            else None
        )
        self.send(
            leader.broker_id,
            message.source,
            "fetched",
            {
                "answer": SimpleNamespace(
                    error_code=read.error_code,
                    high_watermark=read.high_watermark,
                    log_start_offset=read.log_start_offset,
                    records=records,
                    diverging_epoch=diverging,
                ),
                "leader_epoch": body["current_leader_epoch"],
                "number": body["number"],
            },
        )
        self.complete_acks(leader)

    def apply_answer(self, follower: SimBroker, message: Message) -> None:
        if message.body["number"] != follower.fetch_number:
            return  # an answer to a fetch given up on (the connection was replaced)
        follower.fetch_in_flight = False
        partition = follower.partition
        if (
            partition is None
            or partition.is_leader
            or partition.leader_id != message.source
            or partition.leader_epoch != message.body["leader_epoch"]
        ):
            return  # an answer from a leader this follower no longer follows
        apply_fetched(partition, message.body["answer"], source=message.source)

    # --- the producer --------------------------------------------------------------------------

    def produce(self) -> None:
        self.expire_requests()
        if self.in_flight_produce >= 3:
            return
        values = [b"v%06d" % (self.next_value + i) for i in range(self.rng.randint(1, 3))]
        self.next_value += len(values)
        request_id = self.next_request
        self.next_request += 1
        self.pending[request_id] = values
        self.sent_at[request_id] = self.step_number
        self.in_flight_produce += 1
        target = self.producer_view if self.producer_view > 0 else self.rng.choice(BROKERS)
        self.send(0, target, "produce", {"values": values, "id": request_id})

    def expire_requests(self) -> None:
        for request_id, sent_at in list(self.sent_at.items()):
            if self.step_number - sent_at > 40:  # request.timeout: the outcome is unknown
                self.producer_view = self.controller.leader
                self.producer_outcome(request_id, self.pending.get(request_id, []), None)

    def handle_produce(self, broker: SimBroker, message: Message) -> None:
        assert broker.manager is not None
        values, request_id = message.body["values"], message.body["id"]
        partition = broker.partition
        try:
            if partition is None:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            batch = build_batch([NewRecord(value=v) for v in values])
            result = broker.manager.append_records(TP, batch, required_acks=-1)
        except KafkaError as error:
            self.send(broker.broker_id, -1, "answer", {"id": request_id, "error": error.code})
            return
        epoch = partition.leader_epoch
        first = self.leaders_by_epoch.setdefault(epoch, broker.broker_id)
        if first != broker.broker_id:
            raise InvariantViolation(
                f"brokers {first} and {broker.broker_id} both appended as leader in epoch {epoch}"
            )
        broker.acks.append((int(result.last_offset), epoch, values, request_id))
        self.complete_acks(broker)

    def complete_acks(self, broker: SimBroker) -> None:
        partition = broker.partition
        if partition is None or not partition.is_leader or not broker.acks:
            return
        durable = partition.log.recovery_point
        remaining = []
        for last, epoch, values, request_id in broker.acks:
            if epoch != partition.leader_epoch:
                self.producer_outcome(request_id, values, None)
            elif partition.log.high_watermark > last and durable > last:
                first = last - len(values) + 1
                self.send(
                    broker.broker_id, -1, "answer", {"id": request_id, "first": first, "error": 0}
                )
            else:
                remaining.append((last, epoch, values, request_id))
        broker.acks = remaining

    def producer_answer(self, message: Message) -> None:
        body = message.body
        values = self.pending.get(body["id"])
        if values is None:
            return
        if body["error"]:
            self.producer_view = self.controller.leader  # a metadata refresh
            self.producer_outcome(body["id"], values, None)
            return
        self.producer_outcome(body["id"], values, body["first"])

    def producer_outcome(self, request_id: int, values: list[bytes], first: int | None) -> None:
        self.sent_at.pop(request_id, None)
        if self.pending.pop(request_id, None) is None:
            return
        self.in_flight_produce -= 1
        if first is not None:
            for index, value in enumerate(values):
                self.acked[value] = first + index

    # --- invariants ----------------------------------------------------------------------------

    def check_step(self) -> None:
        for broker in self.brokers.values():
            partition = broker.partition
            if partition is None or not partition.is_leader:
                continue
            key = (broker.broker_id, broker.incarnation, partition.leader_epoch)
            high_watermark = partition.log.high_watermark
            if high_watermark < self.high_watermarks.get(key, 0):
                raise InvariantViolation(
                    f"broker {broker.broker_id}'s high watermark went from "
                    f"{self.high_watermarks[key]} to {high_watermark} in epoch {key[2]}"
                )
            self.high_watermarks[key] = high_watermark

    def heal(self) -> None:
        self.log("every fault heals")
        for broker in self.brokers.values():
            broker.isolated_until = -1
            broker.down_until = 0
        for _ in range(HEAL_STEPS):
            self.step(faults=False)
            if self.converged() and self.writer.current is None:
                break
        else:
            raise InvariantViolation(f"the replicas did not converge: {self.describe()}")
        self.check_final()

    def converged(self) -> bool:
        state = self.controller
        if state.leader < 0 or len(state.isr) != len(BROKERS):
            return False
        ends = set()
        for broker in self.brokers.values():
            partition = broker.partition
            if partition is None or broker.known_version != state.version:
                return False
            ends.add((partition.log.log_end_offset, partition.log.high_watermark))
        return len(ends) == 1 and next(iter(ends))[0] == next(iter(ends))[1]

    def describe(self) -> str:
        parts = [f"controller leader {self.controller.leader} ISR {self.controller.isr}"]
        for broker in self.brokers.values():
            partition = broker.partition
            if partition is None:
                parts.append(f"{broker.broker_id}: down")
            else:
                log_ = partition.log
                parts.append(
                    f"{broker.broker_id}: leader {partition.leader_id} epoch "
                    f"{partition.leader_epoch} LEO {log_.log_end_offset} HW {log_.high_watermark}"
                )
        return "; ".join(parts)

    def check_final(self) -> None:
        contents = {}
        for broker in self.brokers.values():
            log_ = broker.partition.log
            read = log_.read(0, max_bytes=1 << 30, max_offset=log_.log_end_offset)
            contents[broker.broker_id] = b"".join(r.read_bytes() for r in read.regions)
        if len(set(contents.values())) != 1:
            sizes = {b: len(c) for b, c in contents.items()}
            raise InvariantViolation(f"replicas differ after healing: sizes {sizes}")
        found: dict[bytes, list[int]] = {}
        for batch in iter_batches(next(iter(contents.values()))):
            for record in batch.records():
                found.setdefault(record.value, []).append(record.offset)
        for value, offset in sorted(self.acked.items(), key=lambda item: item[1]):
            if found.get(value) != [offset]:
                raise InvariantViolation(
                    f"acknowledged {value!r} at offset {offset}, the log has it at "
                    f"{found.get(value, [])}"
                )
        self.reader.check_final(self.writer, self.acked)


@dataclass(frozen=True)
class RunSummary:
    acknowledged: int
    faults: int
    elections: int
    transactions: int
    read_committed: int  # records read at read_committed


def run_replication(seed: int, steps: int) -> RunSummary:
    simulation = ReplicationSimulation(seed)
    try:
        simulation.run(steps)
    except Exception as error:
        trace = "\n".join(simulation.events)
        raise InvariantViolation(f"{error}\nlast events:\n{trace}") from error
    return RunSummary(
        len(simulation.acked),
        simulation.faults,
        simulation.elections,
        simulation.writer.transactions,
        len(simulation.reader.read),
    )
