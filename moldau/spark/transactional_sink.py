"""Exactly-once streaming writes (`exactlyOnce=true`): each micro-batch in Kafka transactions that
Spark's commit protocol commits.

Transactional ids: `<prefix>-<batchId>-<partitionId>`, one per task of a micro-batch. The prefix
is the `transactionalIdPrefix` option, by default `moldau-spark-<queryId>`; the query id is
stored in the checkpoint, so a restarted query uses the same ids. A task learns the query id and
the batch id from the local properties Spark sets for the micro-batch's jobs
(`sql.streaming.queryId`, `streaming.sql.batchId`); `write()` is not told the batch id.

Task (`write`): ask the coordinator for the id's state. `PrepareCommit`/`CompleteCommit` means an
earlier attempt of this batch was committed (the driver died before Spark recorded the batch in
its commit log): write nothing. Otherwise InitProducerId (this aborts what an earlier attempt or
a zombie task left open and fences it), begin, write every row, flush, and return the id,
producer id and epoch WITHOUT committing: the transaction stays open in the coordinator.

Driver (`commit`): EndTxn(commit) for every task's transaction, by id + producer id + epoch,
which the coordinator accepts from any client. `abort`: EndTxn(abort) for the same.

Replays: Spark replays a batch whose commit-log entry is missing. Tasks whose transaction the
coordinator committed skip; the others abort the leftover and write again; so every task's rows
are in the output once. The coordinator's state of the id is the only marker: no extra group or
topic. Requirements: a replayed batch must give each task partition the same rows (true for
deterministic plans over Moldau/Kafka sources, as for any idempotent sink); the driver must
commit within `transaction.timeout.ms` (the `kafka.transaction.timeout.ms` option, default 60 s)
of the write, or the coordinator aborts and the commit fails (the batch then replays); an id's
state lives `transactional.id.expiration.ms` (7 days by default) after its last use, which bounds
how long a query may stay down between a commit and its replay; speculative execution must stay
off (a speculative copy of a task fences the copy whose result Spark may keep).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from moldau.client import KafkaException, Producer
from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.sync import EventLoopThread
from moldau.client.transactions import describe_transaction, end_transaction
from moldau.spark.framed_sink import WriterSchema, encoded_batches
from moldau.spark.options import SinkOptions
from moldau.spark.record_writer import RecordWriter

__all__ = ["TransactionalStreamWriter", "TransactionalWrite", "transactional_id_for_task"]

log = logging.getLogger(__name__)

# Local properties of a micro-batch's jobs (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY); Python tasks read them through TaskContext.
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
COMMITTED_STATES: Final = frozenset({"PrepareCommit", "CompleteCommit"})


@dataclass(frozen=True)
class TransactionalWrite(WriterCommitMessage):
    """A task's report: the open transaction the driver must end (`open` False: nothing to end,
    because the task had no rows or an earlier attempt's transaction was committed)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    records: int
    open: bool
    committed_before: bool = False


def transactional_id_for_task(prefix: str | None) -> str:
    """`<prefix>-<batchId>-<partitionId>` for the running task (see the module docstring)."""
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    if context is None or batch_id is None or (prefix is None and query_id is None):
        raise RuntimeError(
            "exactlyOnce writes need a micro-batch task: Spark did not pass the query and batch "
            "ids (is this a streaming query with a micro-batch trigger?)"
        )
    return f"{prefix or f'moldau-spark-{query_id}'}-{batch_id}-{context.partitionId()}"


def _client_settings(options: SinkOptions, transactional_id: str) -> dict[str, object]:
    settings = {k: v for k, v in options.client.items() if k != "isolation.level"}
    settings["transactional.id"] = transactional_id
    settings["transaction.timeout.ms"] = options.transaction_timeout_ms
    settings["acks"] = "all"
    return settings


def write_transaction(
    options: SinkOptions, transactional_id: str, batches: Iterator[pa.RecordBatch]
) -> TransactionalWrite:
    """Write the rows in a transaction that stays open (the driver ends it)."""
    loop = EventLoopThread("moldau-spark-transaction")
    try:

        async def build() -> Producer:
            return Producer(_client_settings(options, transactional_id))

        producer = loop.run(build())
        writer = RecordWriter(options.client, topic=options.topic, loop=loop, producer=producer)
        with writer:
            state = loop.run(describe_transaction(producer.cluster, transactional_id))
            if state in COMMITTED_STATES:
                log.info("%s: committed by an earlier attempt, not written again", transactional_id)
                for _batch in batches:  # the task's input must still be read to its end
                    pass
                return TransactionalWrite(transactional_id, -1, -1, 0, False, True)
            loop.run(producer.init_transactions())
            loop.run(_begin(producer))
            try:
                for batch in batches:
                    writer.write(batch)
                writer.flush()
            except BaseException:
                _abort_quietly(loop, producer)
                raise
            transactions = producer.transactions
            return TransactionalWrite(
                transactional_id,
                transactions.producer_id,
                transactions.producer_epoch,
                writer.records,
                open=bool(writer.partitions),
            )
    finally:
        loop.stop()


async def _begin(producer: Producer) -> None:
    producer.begin_transaction()


def _abort_quietly(loop: EventLoopThread, producer: Producer) -> None:
    """A failed task aborts its transaction at once rather than leave it to the timeout (a
    retry of the task would abort it too, by InitProducerId on the same id)."""
    try:
        loop.run(producer.abort_transaction(10.0))
    except Exception as exc:
        log.warning("could not abort %s: %s", producer.transactions.transactional_id, exc)


async def _end_all(
    client: dict[str, object], writes: Sequence[TransactionalWrite], *, committed: bool
) -> list[tuple[str, KafkaException]]:
    """EndTxn for each open transaction; returns the failures (id, error)."""
    cluster = Cluster(ClientConfig({k: v for k, v in client.items() if k != "isolation.level"}))
    try:

        async def end(write: TransactionalWrite) -> tuple[str, KafkaException] | None:
            try:
                await end_transaction(
                    cluster,
                    transactional_id=write.transactional_id,
                    producer_id=write.producer_id,
                    producer_epoch=write.producer_epoch,
                    committed=committed,
                )
            except KafkaException as exc:
                return write.transactional_id, exc
            return None

        results = await asyncio.gather(*(end(w) for w in writes))
        return [failure for failure in results if failure is not None]
    finally:
        await cluster.close()


def _open_writes(messages: Sequence[WriterCommitMessage | None]) -> list[TransactionalWrite]:
    return [m for m in messages if isinstance(m, TransactionalWrite) and m.open]


class TransactionalStreamWriter(DataSourceStreamArrowWriter):
    """Tasks write in open transactions; the driver commits or aborts them per micro-batch."""

    def __init__(self, options: SinkOptions, writers: Sequence[WriterSchema] = ()) -> None:
        self.options = options
        self.writers = tuple(writers)  # columns in the schema registry's wire format

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TransactionalWrite:
        transactional_id = transactional_id_for_task(self.options.transactional_id_prefix)
        batches = encoded_batches(self.writers, iterator)
        return write_transaction(self.options, transactional_id, batches)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        failures = self._end(messages, committed=True)
        if failures:
            described = "; ".join(f"{tid}: {error}" for tid, error in failures)
            raise RuntimeError(
                f"committing micro-batch {batchId} failed for {described}. The batch is "
                "replayed when the query restarts; committed tasks are not written again"
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for transactional_id, error in self._end(messages, committed=False):
            # Already aborted (timeout, fencing) or unreachable: the coordinator aborts an open
            # transaction at its timeout and a replay aborts it by InitProducerId.
            log.warning("batch %d: could not abort %s: %s", batchId, transactional_id, error)

    def _end(
        self, messages: Sequence[WriterCommitMessage | None], *, committed: bool
    ) -> list[tuple[str, KafkaException]]:
        writes = _open_writes(messages)
        if not writes:
            return []
        loop = EventLoopThread("moldau-spark-commit")
        try:
            return loop.run(_end_all(dict(self.options.client), writes, committed=committed))
        finally:
            loop.stop()
