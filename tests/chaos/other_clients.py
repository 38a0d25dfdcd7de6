"""Idempotent acks=all producers of other client libraries for chaos runs: aiokafka (asyncio)
and kafka-python, writing unique values `<name>-<seq>` to partition seq mod `partitions` at
`rate` records a second, as `workloads.ProducerWorkload` does with confluent-kafka, and logging
the same history: a send acknowledged is `ok` (with its offset), one that failed or was never
answered by the end is `unknown` (the client may have sent it before giving up). A producer
whose send raises at once (a fatal error: fenced, out of sequence) is replaced by a new one with
a new name.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .history import OK, UNKNOWN, History
from .workloads import Workload

AIOKAFKA = "aiokafka"
KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent-kafka"
CLIENTS = (CONFLUENT, AIOKAFKA, KAFKA_PYTHON)
REQUEST_TIMEOUT_MS = 10_000
DELIVERY_TIMEOUT_MS = 45_000


class _Sends:
    """The sends a producer has not had an answer for yet; each answered exactly once."""

    def __init__(self, workload: Workload, topic: str) -> None:
        self._workload = workload
        self._topic = topic
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[str, int, int, float]] = {}

    def started(self, client: str, value: str, partition: int, sequence: int) -> None:
        with self._lock:
            self._pending[value] = (client, partition, sequence, self._workload.history.now())

    def answered(self, value: str, offset: int | None, error: object | None) -> None:
        with self._lock:
            sent = self._pending.pop(value, None)
        if sent is None:
            return
        client, partition, sequence, start = sent
        detail: dict[str, Any] = (
            {"outcome": OK, "offset": offset} if error is None
            else {"outcome": UNKNOWN, "error": repr(error)}
        )  # fmt: skip
        self._workload.history.record(
            "send", client=client, topic=self._topic, partition=partition, value=value,
            seq=sequence, start=start, **detail,
        )  # fmt: skip

    def unanswered(self) -> int:
        """Every send still without an answer recorded `unknown`; how many there were."""
        with self._lock:
            values = list(self._pending)
        for value in values:
            self.answered(value, None, "no answer by the end")
        return len(values)


class AiokafkaProducerWorkload(Workload):
    def __init__(
        self, name: str, history: History, bootstrap: str, *, topic: str, partitions: int,
        rate: float = 150.0,
    ) -> None:  # fmt: skip
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.sends = _Sends(self, topic)

    def work(self) -> None:
        asyncio.run(self._work())

    async def _producer(self) -> Any:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        while not self.stopping.is_set():
            try:
                await producer.start()
                return producer
            except Exception:  # no broker answers yet (a fault at start): try again
                await asyncio.sleep(0.5)
        return None

    async def _work(self) -> None:
        generation = 1
        client = self.name
        producer = await self._producer()
        sequence = 0
        started = time.monotonic()
        while producer is not None and not self.stopping.is_set():
            value = f"{client}-{sequence:07d}"
            partition = sequence % self.partitions
            self.sends.started(client, value, partition, sequence)
            try:
                delivery = await producer.send(
                    self.topic, value=value.encode(), partition=partition
                )
            except Exception as error:  # refused at once: this producer is done
                self.sends.answered(value, None, error)
                await producer.stop()
                generation += 1
                client = f"{self.name}.{generation}"
                producer = await self._producer()
            else:
                delivery.add_done_callback(
                    lambda done, value=value: self.sends.answered(
                        value,
                        None if done.exception() else done.result().offset,
                        done.exception(),
                    )
                )
            sequence += 1
            ahead = started + sequence / self.rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
        if producer is not None:
            try:
                await asyncio.wait_for(producer.stop(), DELIVERY_TIMEOUT_MS / 1000)
            except Exception as error:
                self.history.record("client-error", client=client, error=repr(error))
        left = self.sends.unanswered()
        self.history.record("client-close", client=client, undelivered=left)


class KafkaPythonProducerWorkload(Workload):
    def __init__(
        self, name: str, history: History, bootstrap: str, *, topic: str, partitions: int,
        rate: float = 150.0,
    ) -> None:  # fmt: skip
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.sends = _Sends(self, topic)

    def _producer(self) -> Any:
        from kafka import KafkaProducer

        while not self.stopping.is_set():
            try:
                return KafkaProducer(
                    bootstrap_servers=self.bootstrap.split(","),
                    acks="all",
                    enable_idempotence=True,
                    linger_ms=5,
                    request_timeout_ms=REQUEST_TIMEOUT_MS,
                    delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                )
            except Exception:  # no broker answers yet: try again
                self.stopping.wait(0.5)
        return None

    def work(self) -> None:
        generation = 1
        client = self.name
        producer = self._producer()
        sequence = 0
        started = time.monotonic()
        while producer is not None and not self.stopping.is_set():
            value = f"{client}-{sequence:07d}"
            partition = sequence % self.partitions
            self.sends.started(client, value, partition, sequence)
            try:
                future = producer.send(self.topic, value=value.encode(), partition=partition)
            except Exception as error:  # refused at once: this producer is done
                self.sends.answered(value, None, error)
                producer.close(5)
                generation += 1
                client = f"{self.name}.{generation}"
                producer = self._producer()
            else:
                future.add_callback(
                    lambda metadata, value=value: self.sends.answered(value, metadata.offset, None)
                )
                future.add_errback(
                    lambda error, value=value: self.sends.answered(value, None, error)
                )
            sequence += 1
            ahead = started + sequence / self.rate - time.monotonic()
            if ahead > 0:
                self.stopping.wait(ahead)
        if producer is not None:
            try:
                producer.flush(DELIVERY_TIMEOUT_MS / 1000)
                producer.close(5)
            except Exception as error:
                self.history.record("client-error", client=client, error=repr(error))
        left = self.sends.unanswered()
        self.history.record("client-close", client=client, undelivered=left)
