"""The registry's state in the log: `_schemas` (one partition, compacted) read into a
`RegistryState` by a background reader, and written by the writer through an idempotent
producer. `wait_applied(offset)` and `catch_up()` give read-your-writes: the writer answers a
command only once its own records are applied, and decides the next command only once it has
applied everything before it.

The topic is created with `replication_factor` replicas (Confluent's
`kafkastore.topic.replication.factor`, 3). The first instance of a cluster started all at once
may run before the other brokers have registered: it waits up to `brokers_wait_s` for as many
active brokers as replicas before it settles for fewer (with a warning, as Confluent's
registry does), so `_schemas` is not left on the one broker that happened to be up first. A
single node (`brokers_wait_s` 0) creates it with one replica at once.

The log end is asked for on a connection of its own: the reader's connection holds a fetch that
waits up to `fetch.wait.max.ms` for records, and an answer on it would wait behind that fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from moldau.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.offsets import LATEST, list_offsets
from moldau.client.tasks import stop_task
from moldau.registry.records import Record
from moldau.registry.state import RegistryState

__all__ = ["SCHEMAS_TOPIC", "SchemaLog"]

log = logging.getLogger(__name__)

SCHEMAS_TOPIC = "_schemas"  # Confluent's `kafkastore.topic` default
REPLICATION_FACTOR = 3  # Confluent's `kafkastore.topic.replication.factor` default
BROKERS_WAIT_S = 15.0
_RETRY_S = 0.5


class SchemaLog:
    """Owns the reader task and the producer; `state` is what has been applied so far."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        *,
        topic: str = SCHEMAS_TOPIC,
        replication_factor: int = REPLICATION_FACTOR,
        brokers_wait_s: float = BROKERS_WAIT_S,
    ) -> None:
        self.client_config = dict(client_config)
        self.topic = topic
        self.replication_factor = replication_factor
        self.brokers_wait_s = brokers_wait_s
        self.partition = TopicPartition(topic, 0)
        self.state = RegistryState()
        self.next_offset = 0  # the offset of the next record to apply
        self.ready = asyncio.Event()  # the topic exists and was read to its end once
        self._applied = asyncio.Condition()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._offsets = Cluster(ClientConfig(self.client_config))  # (asking for the log end)
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._reader = asyncio.create_task(self._run(), name="schema-registry-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            await stop_task(self._reader)
            self._reader = None
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.close(timeout=5)
            self._producer = None
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.close()
            self._consumer = None
        await self._offsets.close()

    # --- reading -------------------------------------------------------------------------

    async def _run(self) -> None:
        brokers_deadline = asyncio.get_running_loop().time() + self.brokers_wait_s
        while True:
            try:
                if await self._ensure_topic(brokers_deadline):
                    break
            except (KafkaException, OSError) as error:
                log.debug("schema registry: %s not ready yet: %s", self.topic, error)
            await asyncio.sleep(_RETRY_S)
        consumer = Consumer(
            {**self.client_config, "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 200}
        )
        self._consumer = consumer
        consumer.assign([self.partition])
        consumer.seek(self.partition, 0)
        while True:
            try:
                if not self.ready.is_set():
                    await self._read_until(consumer, await self._log_end())
                    self.ready.set()
                    log.info(
                        "schema registry: %d schemas read from %s", self.state.max_id, self.topic
                    )
                messages = await consumer.consume(500, timeout=1.0)
                await self._apply(messages)
            except KafkaException as error:
                log.debug("schema registry: reading %s: %s", self.topic, error)
                await asyncio.sleep(_RETRY_S)

    async def _read_until(self, consumer: Consumer, end: int) -> None:
        while self.next_offset < end:
            await self._apply(await consumer.consume(500, timeout=1.0))

    async def _apply(self, messages: list[Any]) -> None:
        if not messages:
            return
        for message in messages:
            if message.error() is not None:
                continue
            self.state.replay(message.key(), message.value())
            self.next_offset = message.offset() + 1
        async with self._applied:
            self._applied.notify_all()

    async def wait_applied(self, offset: int, timeout: float) -> None:
        """Until the record at `offset` is applied (TimeoutError after `timeout` seconds)."""
        async with asyncio.timeout(timeout), self._applied:
            await self._applied.wait_for(lambda: self.next_offset > offset)

    async def catch_up(self, timeout: float) -> None:
        """Until every record written before this call is applied."""
        async with asyncio.timeout(timeout):
            await self.ready.wait()
            end = await self._log_end()
            if end > 0:
                await self.wait_applied(end - 1, timeout)

    async def _log_end(self) -> int:
        """The offset after the last record of `_schemas` (its high watermark)."""
        results = await list_offsets(self._offsets, {self.partition: LATEST})
        return results[self.partition].offset

    async def _ensure_topic(self, brokers_deadline: float) -> bool:
        """True once the topic exists (created here if need be); False while waiting for
        brokers to place its replicas on."""
        async with AdminClient(self.client_config) as admin:
            metadata = await admin.list_topics([self.topic])
            info = metadata.topics.get(self.topic)
            if info is not None and info.partitions:
                return True
            brokers = len(metadata.brokers)
            if brokers < self.replication_factor and self.brokers_wait_s > 0:
                if asyncio.get_running_loop().time() < brokers_deadline:
                    return False
                log.warning(
                    "schema registry: creating %s with %d replicas, fewer than the %d wanted: "
                    "only %d brokers are up",
                    self.topic,
                    max(1, brokers),
                    self.replication_factor,
                    brokers,
                )
            try:
                await admin.create_topics(
                    [
                        NewTopic(
                            self.topic,
                            num_partitions=1,
                            replication_factor=max(1, min(self.replication_factor, brokers)),
                            config={"cleanup.policy": "compact"},
                        )
                    ]
                )
            except KafkaException as error:
                if error.code is not ErrorCode.topic_already_exists:
                    raise
            return True

    # --- writing -------------------------------------------------------------------------

    async def write(self, records: list[Record], timeout: float) -> int:
        """Append `records` in order; the offset of the last one."""
        if self._producer is None:
            self._producer = Producer(
                {
                    **self.client_config,
                    "acks": "all",
                    "linger.ms": 0,
                }
            )
        futures = [
            self._producer.produce(self.topic, record.value, record.key, partition=0)
            for record in records
        ]
        async with asyncio.timeout(timeout):
            await self._producer.flush()
            results = [await future for future in futures]
        return max(result.offset for result in results)
