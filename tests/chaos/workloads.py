"""The clients of a chaos run, each a thread logging every operation with its outcome to the
history: idempotent producers writing unique values, a transactional consume-transform-produce
job (read_committed), a consumer group committing offsets. All are confluent-kafka (librdkafka).

Outcomes: a delivery report without error is `ok`; one with an error is `unknown` (librdkafka may
have sent the batch before giving up on it); a record never reported by the end is `unknown`.
A transaction is `ok` once commit_transaction returned, `failed` once abort_transaction
returned, `unknown` otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .history import FAILED, OK, UNKNOWN, History

CLIENT_LOGS = {"log_level": 3}  # errors only: a killed broker makes librdkafka chatty


class Workload(threading.Thread):
    """A client thread that runs until `stop()`; an exception it dies of is kept for the run."""

    def __init__(self, name: str, history: History, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.history = history
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.crash: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:
            self.crash = error
            self.history.record("client-crash", client=self.name, error=repr(error))

    def work(self) -> None:
        raise NotImplementedError

    @contextmanager
    def protocol_log(self, debug: str) -> Iterator[dict[str, Any]]:
        """librdkafka's `debug` contexts for a client of this workload, written to
        client-<name>.log beside the history (kept only when the run fails): the settings to
        give the client. Nothing when the history has no file."""
        if self.history.path is None:
            yield {}
            return
        logger = logging.getLogger(f"chaos.client.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        handler = logging.FileHandler(self.history.path.parent / f"client-{self.name}.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        try:
            yield {"debug": debug, "log_level": 7, "logger": logger}
        finally:
            logger.removeHandler(handler)
            handler.close()

    def stop(self, timeout_s: float) -> None:
        self.stopping.set()
        self.join(timeout_s)


class ProducerWorkload(Workload):
    """Unique values `<name>-<seq>` to partition seq mod `partitions`, at `rate` records a
    second. A producer that hits a fatal error (fenced, out of sequence) is replaced by a new
    one with a new name: the history shows both."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        *,
        topic: str,
        partitions: int,
        acks: str = "all",
        rate: float = 150.0,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.rate = rate
        self.fatal: list[str] = []

    def _producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": self.acks,
                "enable.idempotence": self.acks == "all",
                "linger.ms": 5,
                "message.timeout.ms": 45_000,
                "request.timeout.ms": 10_000,
                **CLIENT_LOGS,
            }
        )

    def work(self) -> None:
        generation = 1
        client = self.name
        producer = self._producer()
        fatal = threading.Event()
        sequence = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            if fatal.is_set():
                producer.flush(5)
                generation += 1
                client = f"{self.name}.{generation}"
                producer = self._producer()
                fatal = threading.Event()
            value = f"{client}-{sequence:07d}"
            partition = sequence % self.partitions
            self._send(producer, client, value, partition, sequence, fatal)
            sequence += 1
            producer.poll(0)
            ahead = started + sequence / self.rate - time.monotonic()
            if ahead > 0:
                self.stopping.wait(ahead)
        left = producer.flush(50)
        self.history.record("client-close", client=client, undelivered=left)

    def _send(
        self,
        producer: Producer,
        client: str,
        value: str,
        partition: int,
        sequence: int,
        fatal: threading.Event,
    ) -> None:
        start = self.history.now()

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                self.history.record(
                    "send", client=client, topic=self.topic, partition=partition, value=value,
                    seq=sequence, outcome=OK, offset=message.offset(), start=start,
                )  # fmt: skip
                return
            if error.fatal():
                fatal.set()
                self.fatal.append(str(error))
            self.history.record(
                "send", client=client, topic=self.topic, partition=partition, value=value,
                seq=sequence, outcome=UNKNOWN, error=str(error), start=start,
            )  # fmt: skip

        while True:
            try:
                producer.produce(
                    self.topic, value=value, partition=partition, on_delivery=delivered
                )
                return
            except BufferError:  # the local queue is full: wait for deliveries
                producer.poll(0.1)
            except KafkaException as error:
                # Refused before it was queued: librdkafka knows the topic is gone (a deleted
                # topic, until it is created again). Nothing was sent.
                self.history.record(
                    "send", client=client, topic=self.topic, partition=partition, value=value,
                    seq=sequence, outcome=FAILED, error=str(error), start=start,
                )  # fmt: skip
                return


OFFSETS_TIMEOUT_S = 15
REWIND_PATIENCE_S = 30  # committed offsets unobtainable this long: start over with new clients
STALLED = "stalled"  # the producer stuck inside send_offsets_to_transaction


class TransformJob(Workload):
    """Consume-transform-produce in transactions: reads `source` read_committed (assigned, with
    the group's committed offsets), writes `<input value>|<name>-<transaction>` to the same
    partition of `sink`, and commits the input offsets in the transaction. After an abort it
    rewinds to the committed offsets (a new read session); after an unknown outcome it starts
    over with new clients, and likewise when send_offsets_to_transaction is still inside after
    twice its timeout (librdkafka #5511/#5456, RELIABILITY.md): the stuck producer is given up,
    and the new one's InitProducerId fences it and ends its transaction."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        *,
        source: str,
        sink: str,
        partitions: int,
        group: str,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.source = source
        self.sink = sink
        self.partitions = partitions
        self.group = group
        self.session = 0
        self.transactions = 0
        # Producers given up inside send_offsets_to_transaction, with the thread still in it.
        self.abandoned: list[tuple[threading.Thread, Producer]] = []

    def _clients(self) -> tuple[Producer, Consumer]:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.name,
                "transaction.timeout.ms": 10_000,
                "message.timeout.ms": 10_000,
                "linger.ms": 5,
                **CLIENT_LOGS,
            }
        )
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **CLIENT_LOGS,
            }
        )
        return producer, consumer

    def _rewind(self, consumer: Consumer) -> None:
        """Assign every input partition at the group's committed offset: a new read session."""
        partitions = [TopicPartition(self.source, p) for p in range(self.partitions)]
        committed = consumer.committed(partitions, timeout=10)
        consumer.assign(
            [TopicPartition(self.source, tp.partition, max(tp.offset, 0)) for tp in committed]
        )
        self.session += 1

    def work(self) -> None:
        producer, consumer = self._clients()
        self._retry(lambda: producer.init_transactions(15))
        self._retry(lambda: self._rewind(consumer))
        while not self.stopping.is_set():
            start = self.history.now()
            messages = [m for m in consumer.consume(100, 0.3) if m.error() is None]
            if not messages:
                continue
            self.history.record(
                "poll", client=self.name, session=self.session, isolation="read_committed",
                records=[[m.topic(), m.partition(), m.offset(), m.value().decode()]
                         for m in messages],
                start=start,
            )  # fmt: skip
            outcome = self._transform(producer, consumer, messages)
            if outcome in ("fatal", STALLED):
                producer, consumer = self._replace(producer, consumer, stalled=outcome == STALLED)
            elif outcome != OK and not self._rewound(consumer):
                # the consumer stayed unable to get its group's offsets after coordinators moved
                # (pause-leader seed 8: 137 s, while the coordinator answered other clients;
                # not diagnosed, RELIABILITY.md): go on with new clients, as for #5511
                producer, consumer = self._replace(producer, consumer, stalled=True)
        consumer.close()
        producer.flush(10)

    def _transform(self, producer: Producer, consumer: Consumer, messages: list[Any]) -> str:
        self.transactions += 1
        label = f"{self.name}-{self.transactions}"
        writes = [[self.sink, m.partition(), f"{m.value().decode()}|{label}"] for m in messages]
        following: dict[int, int] = {}
        for message in messages:
            following[message.partition()] = message.offset() + 1
        offsets = [[self.source, p, o] for p, o in sorted(following.items())]
        start = self.history.now()
        outcome = UNKNOWN
        error_text = None
        deliveries: dict[str, int] = {}  # per partition: acknowledged, or the first error

        def delivered(error: Any, message: Any) -> None:
            slot = f"{message.partition()} {error}" if error else f"{message.partition()} ok"
            deliveries[slot] = deliveries.get(slot, 0) + 1

        try:
            producer.begin_transaction()
            for topic, partition, value in writes:
                producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
            if self._send_offsets(
                producer,
                [TopicPartition(self.source, p, o) for _, p, o in offsets],
                consumer.consumer_group_metadata(),
            ):
                producer.commit_transaction(15)
                outcome = OK
            else:
                outcome = STALLED
                error_text = "send_offsets_to_transaction stalled (librdkafka #5511/#5456)"
        except KafkaException as exception:
            error = exception.args[0]
            error_text = str(error)
            if error.fatal():
                outcome = "fatal"
            elif error.txn_requires_abort():
                outcome = self._abort(producer)
            elif error.retriable():  # commit_transaction may be called again
                outcome = self._commit_again(producer)
        settled = outcome in (OK, FAILED)
        self.history.record(
            "txn", client=self.name, group=self.group, writes=writes, offsets=offsets,
            outcome=outcome if settled else UNKNOWN, error=error_text, start=start,
            deliveries=deliveries,
        )  # fmt: skip
        # A transaction neither committed nor aborted leaves the producer in a state only
        # retries of the same call can leave: start over with new clients instead (their
        # InitProducerId fences this producer and ends its transaction).
        if outcome == STALLED:
            return STALLED
        return outcome if settled else "fatal"

    def _send_offsets(self, producer: Producer, offsets: list[Any], metadata: Any) -> bool:
        """send_offsets_to_transaction, in a thread of its own so that the job can give the
        producer up when the call is still inside after twice its timeout (False then); an
        error it raised is raised here."""
        raised: list[BaseException] = []

        def call() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, metadata, OFFSETS_TIMEOUT_S)
            except BaseException as error:
                raised.append(error)

        thread = threading.Thread(target=call, name=f"{self.name}-send-offsets", daemon=True)
        thread.start()
        thread.join(2 * OFFSETS_TIMEOUT_S)
        if thread.is_alive():
            self.abandoned.append((thread, producer))
            return False
        if raised:
            raise raised[0]
        return True

    def _abort(self, producer: Producer) -> str:
        try:
            producer.abort_transaction(15)
            return FAILED
        except KafkaException as exception:
            return "fatal" if exception.args[0].fatal() else UNKNOWN

    def _commit_again(self, producer: Producer) -> str:
        for _ in range(5):
            try:
                producer.commit_transaction(15)
                return OK
            except KafkaException as exception:
                error = exception.args[0]
                if error.fatal():
                    return "fatal"
                if error.txn_requires_abort():
                    return self._abort(producer)
        return UNKNOWN

    def _rewound(self, consumer: Consumer) -> bool:
        """`_rewind`, tried for REWIND_PATIENCE_S; False if the consumer never got its offsets."""
        deadline = time.monotonic() + REWIND_PATIENCE_S
        while not self.stopping.is_set():
            try:
                self._rewind(consumer)
                return True
            except KafkaException:
                if time.monotonic() > deadline:
                    return False
                self.stopping.wait(0.5)
        return True

    def _replace(
        self, producer: Producer, consumer: Consumer, *, stalled: bool = False
    ) -> tuple[Producer, Consumer]:
        """New clients; stalled ones are left alone (a call may still be inside them), closed
        in the background (a stuck consumer's close may wait as long)."""
        self.history.record("client-stalled" if stalled else "client-fatal", client=self.name)
        threading.Thread(target=consumer.close, name=f"{self.name}-close", daemon=True).start()
        producer, consumer = self._clients()
        self._retry(lambda: producer.init_transactions(15))
        self._retry(lambda: self._rewind(consumer))
        return producer, consumer

    def _retry(self, action: Any) -> None:
        """An operation that must succeed within 120 s once the cluster answers (or the job
        is told to stop)."""
        deadline = time.monotonic() + 120
        while not self.stopping.is_set():
            try:
                action()
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                self.stopping.wait(0.5)


class GroupConsumer(Workload):
    """A consumer group member reading `topic` (read_committed), committing the offsets it
    consumed every `commit_every` records (synchronously), and reading the committed offsets
    back after each commit."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        *,
        topic: str,
        group: str,
        commit_every: int = 200,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.group = group
        self.commit_every = commit_every
        self.session = 0

    def work(self) -> None:
        # The group protocol as the client saw it (JoinGroup, SyncGroup, heartbeats, coordinator
        # changes): what a run whose group stalls needs beside the brokers' logs.
        with self.protocol_log("cgrp") as protocol_log:
            self._consume(protocol_log)

    def _consume(self, protocol_log: dict[str, Any]) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                **CLIENT_LOGS,
                **protocol_log,
            }
        )

        positions: dict[int, int] = {}  # of the current assignment only

        def assigned(_consumer: Any, _partitions: Any) -> None:
            self.session += 1
            positions.clear()

        consumer.subscribe([self.topic], on_assign=assigned)
        uncommitted = 0
        while not self.stopping.is_set():
            start = self.history.now()
            messages = [m for m in consumer.consume(200, 0.3) if m.error() is None]
            if messages:
                self.history.record(
                    "poll", client=self.name, session=self.session, isolation="read_committed",
                    records=[[m.topic(), m.partition(), m.offset(), m.value().decode()]
                             for m in messages],
                    start=start,
                )  # fmt: skip
                for message in messages:
                    positions[message.partition()] = message.offset() + 1
                uncommitted += len(messages)
            if uncommitted >= self.commit_every and positions:
                self._commit(consumer, positions)
                uncommitted = 0
        consumer.close()

    def _commit(self, consumer: Consumer, positions: dict[int, int]) -> None:
        offsets = [[self.topic, p, o] for p, o in sorted(positions.items())]
        start = self.history.now()
        try:
            consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for _, p, o in offsets],
                asynchronous=False,
            )
            outcome, error_text = OK, None
        except KafkaException as exception:
            outcome, error_text = UNKNOWN, str(exception.args[0])
        self.history.record(
            "commit", client=self.name, group=self.group, offsets=offsets, outcome=outcome,
            error=error_text, start=start,
        )  # fmt: skip
        start = self.history.now()
        try:
            committed = consumer.committed(
                [TopicPartition(self.topic, p) for p in sorted(positions)], timeout=10
            )
        except KafkaException:
            return
        self.history.record(
            "committed", client=self.name, group=self.group, start=start,
            offsets=[[self.topic, tp.partition, tp.offset] for tp in committed if tp.offset >= 0],
        )  # fmt: skip
