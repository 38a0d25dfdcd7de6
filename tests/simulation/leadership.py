"""A deterministic simulation of the controller deciding partition leadership while brokers
register, heartbeat, lag behind the metadata log, crash, restart, shut down and race each other
with AlterPartition, under one seeded random source and a manual clock.

The controller is `ControllerCore` over a committed log (a list of entries, each applied whole,
as the metadata quorum commits them; the quorum itself is simulated in `cluster.py`). Every
broker keeps its own image, replaying entries some steps late, and acts on that image only: it
proposes ISR changes for partitions it believes it leads with the epochs it believes in, so
stale proposals, fenced leaders and lost races happen by themselves.

`LeadershipChecker` runs after every commit:
- a partition's ISR is a non-empty set of its replicas; a leader is in the ISR and active;
- leader and partition epochs never go down; the partition epoch moves with every change and
  the leader epoch with every change of leader; one leader epoch never has two leaders;
- a leader from outside the ISR only by an unclean election the topic (or the request) allowed,
  which leaves the leader alone in the ISR and RECOVERING;
- the ISR grows only by AlterPartition, and only with brokers active at that moment;
- an accepted AlterPartition answers exactly the committed state;
- a broker told to shut down leads nothing, and every active broker had said it replayed the
  move of its leaderships;
- broker epochs only grow.
At the end every fault heals; every partition must then have a leader.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.config.values import BrokerConfig
from moldau.controller.core import ControllerCore
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    AlterPartitionResult,
    BrokerHeartbeat,
    BrokerRegistration,
    ConfigResource,
    IncrementalAlterConfigsResource,
    IsrMember,
    IsrProposal,
    NewTopic,
    PartitionReassignment,
)
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage, PartitionImage
from moldau.metadata.records import (
    BrokerEndpoint,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError

SESSION_MS = 9000
HEAL_ROUNDS = 40
_REREGISTER = {ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered}


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimulatedBroker:
    broker_id: int
    rack: str | None
    view: MetadataImage
    alive: bool = True
    incarnation: int = 0
    broker_epoch: int = -1  # -1: not registered in this incarnation
    shutting_down: bool = False
    reported_offset: int = -1  # what its last heartbeat said it had replayed
    applied_entries: int = 0


@dataclass
class Entry:
    last_offset: int
    records: list[MetadataRecord]


@dataclass
class RunResult:
    commits: int = 0
    leader_changes: int = 0
    alter_partition_accepted: int = 0
    alter_partition_refused: int = 0
    reassignments_started: int = 0
    reassignments_completed: int = 0
    reassignments_cancelled: int = 0
    unclean_elections: int = 0
    controlled_shutdowns: int = 0
    trace: deque[str] = field(default_factory=lambda: deque(maxlen=40))


class LeadershipSimulation:
    def __init__(self, seed: int, *, brokers: int = 5, racks: int = 3) -> None:
        self.random = random.Random(seed)
        self.now_ms = 0
        percentage = self.random.choice([0, 10, 50])
        self.core = ControllerCore(
            config=BrokerConfig(
                {
                    "broker.session.timeout.ms": str(SESSION_MS),
                    "leader.imbalance.per.broker.percentage": str(percentage),
                }
            ),
            image=MetadataImage.empty("sim"),
            uuid_factory=lambda: uuid.UUID(int=self.random.getrandbits(128) | 1),
        )
        self.log: list[Entry] = []
        self.brokers = {
            broker_id: SimulatedBroker(
                broker_id=broker_id,
                rack=f"rack-{broker_id % racks}" if racks else None,
                view=MetadataImage.empty("sim"),
            )
            for broker_id in range(1, brokers + 1)
        }
        self.result = RunResult()
        self.checker = LeadershipChecker(self)
        self.core.activate(now_ms=0)

    # --- the metadata log --------------------------------------------------------------------

    def commit(
        self, records: Sequence[MetadataRecord], *, operation: str, **context: object
    ) -> None:
        if not records:
            return
        previous = self.core.image
        last = (self.log[-1].last_offset if self.log else -1) + len(records)
        self.log.append(Entry(last_offset=last, records=list(records)))
        self.core.replay(records, offset=last)
        self.result.commits += 1
        self.result.trace.append(f"t={self.now_ms} {operation} {context or ''}: {list(records)}")
        self.checker.after_commit(previous, records, operation=operation)

    def catch_up(self, broker: SimulatedBroker, entries: int) -> None:
        for entry in self.log[broker.applied_entries : broker.applied_entries + entries]:
            delta = MetadataDelta(broker.view)
            for record in entry.records:
                delta.replay(record)
            delta.set_offset(entry.last_offset)
            broker.view = delta.apply()
            broker.applied_entries += 1

    # --- what brokers do ---------------------------------------------------------------------

    def register(self, broker: SimulatedBroker) -> None:
        try:
            records, result = self.core.register_broker(
                BrokerRegistration(
                    broker_id=broker.broker_id,
                    incarnation_id=uuid.UUID(int=broker.broker_id * 1000 + broker.incarnation),
                    endpoints=[BrokerEndpoint(name="PLAINTEXT", host="b", port=broker.broker_id)],
                    rack=broker.rack,
                    cluster_id="sim",
                ),
                now_ms=self.now_ms,
                unfence=False,
            )
        except KafkaError as error:
            assert error.code == ErrorCode.duplicate_broker_registration, error
            return
        self.commit(records, operation="register", broker=broker.broker_id)
        broker.broker_epoch = result.broker_epoch

    def heartbeat(self, broker: SimulatedBroker) -> None:
        if broker.broker_epoch < 0:
            self.register(broker)
            return
        offset = broker.view.offset
        try:
            records, result = self.core.broker_heartbeat(
                BrokerHeartbeat(
                    broker_id=broker.broker_id,
                    broker_epoch=broker.broker_epoch,
                    current_metadata_offset=offset,
                    want_shut_down=broker.shutting_down,
                ),
                now_ms=self.now_ms,
            )
        except KafkaError as error:
            assert error.code in _REREGISTER, error
            broker.broker_epoch = -1
            return
        broker.reported_offset = offset
        before = self.core.image
        self.commit(records, operation="heartbeat", broker=broker.broker_id)
        if result.should_shut_down:
            self.checker.shut_down(broker, was_fenced=before.brokers[broker.broker_id].fenced)
            self.result.controlled_shutdowns += 1
            broker.alive = False
            broker.shutting_down = False
            broker.broker_epoch = -1
            broker.incarnation += 1  # (it starts again as a new incarnation)

    def alter_partition(self, broker: SimulatedBroker) -> None:
        """Propose ISR changes for some partitions this broker's (perhaps stale) view says it
        leads: drop a follower, or add a replica its view shows active."""
        if broker.broker_epoch < 0:
            return
        changes = []
        for topic in broker.view.topics.values():
            for partition in topic.partitions.values():
                if partition.leader != broker.broker_id or self.random.random() < 0.5:
                    continue
                isr = self._proposed_isr(broker.view, partition)
                if isr is None:
                    continue
                changes.append(
                    IsrProposal(
                        topic_id=topic.topic_id,
                        partition=partition.partition,
                        leader_epoch=partition.leader_epoch,
                        partition_epoch=partition.partition_epoch,
                        new_isr=[
                            IsrMember(
                                broker_id=b,
                                broker_epoch=broker.view.brokers[b].broker_epoch
                                if b in broker.view.brokers
                                else -1,
                            )
                            for b in isr
                        ],
                        leader_recovery_state=0,
                    )
                )
        if not changes:
            return
        try:
            records, results = self.core.alter_partition(
                broker_id=broker.broker_id, broker_epoch=broker.broker_epoch, changes=changes
            )
        except KafkaError as error:
            assert error.code == ErrorCode.stale_broker_epoch, error
            return
        before = self.core.image
        self.commit(records, operation="alter_partition", broker=broker.broker_id)
        self.checker.alter_partition_answered(before, self.core.image, broker, changes, results)

    def _proposed_isr(self, view: MetadataImage, partition: PartitionImage) -> list[int] | None:
        isr = list(partition.isr)
        outside = [b for b in partition.replicas if b not in isr and view.is_active_broker(b)]
        followers = [b for b in isr if b != partition.leader]
        if outside and (not followers or self.random.random() < 0.6):
            return [*isr, self.random.choice(outside)]
        if followers:
            return [b for b in isr if b != self.random.choice(followers)]
        if partition.leader_recovery_state:
            return isr  # (a recovering leader reports itself recovered, below)
        return None

    # --- the run -----------------------------------------------------------------------------

    def step(self) -> None:
        self.now_ms += self.random.choice([0, 10, 20, 50, 100, 200, 300, 1000])
        if self.random.random() < 0.01:
            self.now_ms += SESSION_MS // 2  # (a stall: sessions run out here and there)
        live = [b for b in self.brokers.values() if b.alive]
        roll = self.random.random()
        if roll < 0.35 and live:
            broker = self.random.choice(live)
            self.catch_up(broker, self.random.randint(0, 3))  # (brokers replay as they go)
            self.heartbeat(broker)
        elif roll < 0.45 and live:
            broker = self.random.choice(live)
            self.catch_up(broker, self.random.randint(1, 5))
        elif roll < 0.60 and live:
            self.alter_partition(self.random.choice(live))
        elif roll < 0.65:
            records, _ = self.core.fence_expired_brokers(now_ms=self.now_ms)
            self.commit(records, operation="fence_expired")
        elif roll < 0.67 and live:
            victim = self.random.choice(live)
            victim.alive = False  # a crash: no more heartbeats from this incarnation
            victim.broker_epoch = -1
            victim.shutting_down = False
            self.result.trace.append(f"t={self.now_ms} crash {victim.broker_id}")
        elif roll < 0.75:
            dead = [b for b in self.brokers.values() if not b.alive]
            if dead:
                broker = self.random.choice(dead)
                broker.alive = True
                broker.incarnation += 1
                self.register(broker)
        elif roll < 0.77 and live:
            broker = self.random.choice(live)
            broker.shutting_down = True
            self.result.trace.append(f"t={self.now_ms} begin shutdown {broker.broker_id}")
        elif roll < 0.81:
            self.create_topic()
        elif roll < 0.84:
            self.elect()
        elif roll < 0.87:
            records, _ = self.core.balance_partition_leaders()
            self.commit(records, operation="balance")
        elif roll < 0.89:
            self.toggle_unclean()
        elif roll < 0.90:
            self.core.activate(now_ms=self.now_ms)  # another controller takes over
            self.result.trace.append(f"t={self.now_ms} controller failover")
        elif roll < 0.94:
            self.reassign()

    def create_topic(self) -> None:
        name = f"t{self.random.randint(0, 6)}"
        records, _ = self.core.create_topics(
            [
                NewTopic(
                    name=name,
                    num_partitions=self.random.randint(1, 4),
                    replication_factor=self.random.randint(1, 4),
                    configs={"unclean.leader.election.enable": "true"}
                    if self.random.random() < 0.2
                    else {},
                )
            ]
        )
        self.commit(records, operation="create_topic", topic=name)

    def elect(self) -> None:
        unclean = self.random.random() < 0.3
        topics = sorted(self.core.image.topics)
        requested = None
        if topics and self.random.random() < 0.7:
            name = self.random.choice(topics)
            requested = [(name, sorted(self.core.image.topics[name].partitions))]
        records, _ = self.core.elect_leaders(1 if unclean else 0, requested)
        self.commit(records, operation="elect_unclean" if unclean else "elect_preferred")

    def reassign(self) -> None:
        """Move a partition to random registered brokers (or cancel its reassignment)."""
        image = self.core.image
        partitions = [(t.name, p.partition) for t, p in image.iter_partitions()]
        if not partitions or not image.brokers:
            return
        name, index = self.random.choice(sorted(partitions))
        target: list[int] | None = None
        if self.random.random() < 0.75:
            size = self.random.randint(1, min(4, len(image.brokers)))
            target = self.random.sample(sorted(image.brokers), size)
        records, [result] = self.core.alter_partition_reassignments(
            [PartitionReassignment(topic=name, partition=index, replicas=target)]
        )
        if result.error_code == ErrorCode.none:
            if target is None:
                self.result.reassignments_cancelled += 1
            else:
                self.result.reassignments_started += 1
        self.commit(records, operation="reassign", topic=name, partition=index, target=target)

    def toggle_unclean(self) -> None:
        topics = sorted(self.core.image.topics)
        if not topics:
            return
        name = self.random.choice(topics)
        value = self.random.choice(["true", "false", None])
        records, _ = self.core.incremental_alter_configs(
            [
                IncrementalAlterConfigsResource(
                    resource=ConfigResource(
                        resource_type=ConfigResourceType.TOPIC, resource_name=name
                    ),
                    configs=[
                        AlterableConfig(
                            name="unclean.leader.election.enable",
                            op=AlterConfigOp.SET if value else AlterConfigOp.DELETE,
                            value=value,
                        )
                    ],
                )
            ]
        )
        self.commit(records, operation="unclean_config", topic=name, value=value)

    def heal(self) -> None:
        """Every broker back, caught up and heartbeating (those shutting down finish first and
        start again): every partition gets a leader."""
        for broker in self.brokers.values():
            if not broker.alive:
                broker.alive = True
                broker.incarnation += 1
        for _ in range(HEAL_ROUNDS):
            self.now_ms += SESSION_MS  # (old sessions run out; fresh registrations go through)
            for broker in self.brokers.values():
                broker.alive = True  # (one that finished a controlled shutdown comes back)
                self.catch_up(broker, len(self.log))
                self.heartbeat(broker)
            records, _ = self.core.fence_expired_brokers(now_ms=self.now_ms)
            self.commit(records, operation="fence_expired")
        image = self.core.image
        assert all(b.is_active for b in image.brokers.values()), image.brokers
        for topic, partition in image.iter_partitions():
            if not partition.has_leader:
                raise InvariantViolation(
                    f"{topic.name}-{partition.partition} has no leader after healing: {partition}"
                )

    def run(self, steps: int) -> RunResult:
        for broker in self.brokers.values():
            self.register(broker)
        for broker in self.brokers.values():
            self.catch_up(broker, len(self.log))
            self.heartbeat(broker)
        for _ in range(3):
            self.create_topic()
        for _ in range(steps):
            self.step()
        self.heal()
        return self.result


def _unclean_enabled(image: MetadataImage, topic_name: str) -> bool:
    return image.topic_configs(topic_name).get("unclean.leader.election.enable") == "true"


class LeadershipChecker:
    def __init__(self, simulation: LeadershipSimulation) -> None:
        self.simulation = simulation
        # (topic id, partition, leader epoch) -> the one leader (or -1) it ever had.
        self.epoch_leaders: dict[tuple[uuid.UUID, int, int], int] = {}
        self.broker_epochs: dict[int, int] = {}
        # Broker -> the offset by which its controlled shutdown had moved its leaderships.
        self.shutdown_moved_at: dict[int, int] = {}

    def fail(self, message: str) -> None:
        raise InvariantViolation(message)

    def after_commit(
        self, previous: MetadataImage, records: Sequence[MetadataRecord], *, operation: str
    ) -> None:
        """Each record's change on the image before it, then the committed image as a whole."""
        image = previous
        for record in records:
            delta = MetadataDelta(image)
            delta.replay(record)
            after = delta.apply()
            if isinstance(record, PartitionChangeRecord | PartitionRecord):
                topic = after.topics_by_id[record.topic_id]
                new = topic.partitions[record.partition]
                self.record_leader(topic.topic_id, f"{topic.name}-{record.partition}", new)
                old_topic = image.topics_by_id.get(record.topic_id)
                old = old_topic.partitions.get(record.partition) if old_topic else None
                if old is not None:
                    self.check_change(image, topic.name, old, new, operation)
            image = after
        committed = self.simulation.core.image
        if dict(image.topics) != dict(committed.topics) or dict(image.brokers) != dict(
            committed.brokers
        ):
            self.fail("replaying the records one by one gave another image than the commit")
        for broker in committed.brokers.values():
            if broker.broker_epoch < self.broker_epochs.get(broker.broker_id, -1):
                self.fail(f"broker {broker.broker_id}'s epoch went down")
            self.broker_epochs[broker.broker_id] = broker.broker_epoch
            was = previous.brokers.get(broker.broker_id)
            if broker.in_controlled_shutdown and (was is None or not was.in_controlled_shutdown):
                self.shutdown_moved_at[broker.broker_id] = committed.offset
            elif not broker.in_controlled_shutdown:
                self.shutdown_moved_at.pop(broker.broker_id, None)  # (a new incarnation)
        for topic, partition in committed.iter_partitions():
            self.check_partition(committed, f"{topic.name}-{partition.partition}", partition)

    def record_leader(self, topic_id: uuid.UUID, name: str, partition: PartitionImage) -> None:
        key = (topic_id, partition.partition, partition.leader_epoch)
        known = self.epoch_leaders.setdefault(key, partition.leader)
        if known != partition.leader:
            self.fail(
                f"{name} leader epoch {partition.leader_epoch} had {known} and now "
                f"{partition.leader}"
            )

    def check_partition(self, image: MetadataImage, name: str, partition: PartitionImage) -> None:
        replicas, adding, removing = (
            partition.replicas,
            set(partition.adding_replicas),
            set(partition.removing_replicas),
        )
        if len(set(replicas)) != len(replicas) or not adding | removing <= set(replicas):
            self.fail(f"{name}'s reassignment is not within its replicas: {partition}")
        if adding & removing:
            self.fail(f"{name} adds and removes the same replica: {partition}")
        target = [r for r in replicas if r not in removing]
        if partition.is_reassigning and set(target) <= set(partition.isr):
            self.fail(f"{name}'s reassignment could have completed: {partition}")
        isr = partition.isr
        if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(partition.replicas):
            self.fail(f"{name} has a bad ISR {isr} (replicas {partition.replicas})")
        if partition.has_leader:
            if partition.leader not in isr:
                self.fail(f"{name}'s leader {partition.leader} is not in its ISR {isr}")
            if not image.is_active_broker(partition.leader):
                self.fail(f"{name}'s leader {partition.leader} is fenced or shutting down")
        if len(isr) > 1:
            inactive = [b for b in isr if not image.is_active_broker(b)]
            if inactive:
                self.fail(f"{name}'s ISR {isr} keeps inactive brokers {inactive}")

    def check_change(
        self,
        previous: MetadataImage,
        topic_name: str,
        old: PartitionImage,
        new: PartitionImage,
        operation: str,
    ) -> None:
        name = f"{topic_name}-{new.partition}"
        if new.leader_epoch < old.leader_epoch or new.partition_epoch < old.partition_epoch:
            self.fail(f"{name}'s epochs went back: {old} -> {new}")
        if new == old:
            return
        if new.partition_epoch == old.partition_epoch:
            self.fail(f"{name} changed without a new partition epoch: {old} -> {new}")
        if (new.leader != old.leader) != (new.leader_epoch != old.leader_epoch):
            self.fail(f"{name}'s leader epoch does not follow its leader: {old} -> {new}")
        if new.leader != old.leader:
            self.simulation.result.leader_changes += 1
        if new.replicas != old.replicas or new.is_reassigning != old.is_reassigning:
            self.check_replicas_change(name, old, new, operation)
        added = set(new.isr) - set(old.isr)
        # (AlterPartition completing a reassignment may hand the lead to a replica it takes in)
        completed_by_alter = (
            operation == "alter_partition" and old.is_reassigning and not new.is_reassigning
        )
        unclean = (
            new.has_leader
            and new.leader != old.leader
            and new.leader not in old.isr
            and not completed_by_alter
        )
        if unclean:
            allowed = operation == "elect_unclean" or _unclean_enabled(previous, topic_name)
            if not allowed:
                self.fail(f"{name}: unclean election by {operation} not allowed: {old} -> {new}")
            if new.isr != (new.leader,) or not new.leader_recovery_state:
                self.fail(f"{name}: an unclean leader must be alone and RECOVERING: {new}")
            self.simulation.result.unclean_elections += 1
        elif added and operation != "alter_partition":
            self.fail(f"{name}'s ISR grew by {operation}: {old} -> {new}")
        for broker_id in added:
            if not unclean and not previous.is_active_broker(broker_id):
                self.fail(f"{name}'s ISR took in inactive broker {broker_id}: {new}")

    def check_replicas_change(
        self, name: str, old: PartitionImage, new: PartitionImage, operation: str
    ) -> None:
        """Replicas change only by a reassignment's start or cancel, or by its completion, which
        needs every target replica in the ISR and drops exactly the removing ones."""
        completed = old.is_reassigning and not new.is_reassigning
        target = tuple(r for r in old.replicas if r not in old.removing_replicas)
        if completed and new.replicas == target and set(target) <= set(new.isr):
            self.simulation.result.reassignments_completed += 1
            if set(new.isr) - set(target):
                self.fail(f"{name} kept removed replicas in its ISR: {old} -> {new}")
            return
        if operation != "reassign":
            self.fail(f"{name}'s replicas changed by {operation}: {old} -> {new}")
        if new.leader != old.leader and old.leader in new.replicas:
            self.fail(f"{name}: a reassignment moved a leader that stays: {old} -> {new}")

    def alter_partition_answered(
        self,
        before: MetadataImage,
        after: MetadataImage,
        broker: SimulatedBroker,
        changes: Sequence[IsrProposal],
        results: Sequence[AlterPartitionResult],
    ) -> None:
        for change, result in zip(changes, results, strict=True):
            code = result.error_code
            if code != ErrorCode.none:
                self.simulation.result.alter_partition_refused += 1
                continue
            self.simulation.result.alter_partition_accepted += 1
            topic = after.topics_by_id[change.topic_id]
            partition = topic.partitions[change.partition]
            old = before.topics_by_id[change.topic_id].partitions[change.partition]
            if (old.leader_epoch, old.partition_epoch) != (
                change.leader_epoch,
                change.partition_epoch,
            ):
                self.fail(f"AlterPartition accepted stale epochs: {change} at {old}")
            answered = (
                result.leader_id,
                result.leader_epoch,
                result.isr,
                result.partition_epoch,
            )
            committed = (
                partition.leader,
                partition.leader_epoch,
                partition.isr,
                partition.partition_epoch,
            )
            if answered != committed or partition.leader != broker.broker_id:
                self.fail(f"AlterPartition answered {answered}, committed {committed}")

    def shut_down(self, broker: SimulatedBroker, *, was_fenced: bool) -> None:
        image = self.simulation.core.image
        for topic, partition in image.iter_partitions():
            if partition.leader == broker.broker_id:
                self.fail(f"broker {broker.broker_id} shut down leading {topic.name}")
        moved_at = self.shutdown_moved_at.pop(broker.broker_id, None)
        if moved_at is None or was_fenced:
            return  # it led nothing when it asked, or was fenced already: it may go at once
        for other in self.simulation.brokers.values():
            if other is broker or not image.is_active_broker(other.broker_id):
                continue
            if other.reported_offset < moved_at:
                self.fail(
                    f"broker {broker.broker_id} shut down before broker {other.broker_id} "
                    f"replayed its leaderships' move ({other.reported_offset} < {moved_at})"
                )
