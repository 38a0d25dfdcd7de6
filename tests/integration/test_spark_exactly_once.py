"""Exactly-once streaming writes (`writeStream.format("moldau").option("exactlyOnce", "true")`).

A driver that dies around the sink's commit is simulated by a sink whose `commit` raises (before
or after committing the transactions) and whose `abort` does nothing, as if the process had
died; the query is then restarted from its checkpoint with the real sink, Spark replays the
micro-batch, and the output topic is read back at read_committed and read_uncommitted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from moldau.client import OFFSET_BEGINNING, SyncConsumer, TopicPartition

from .conftest import MoldauServer
from .support import DEADLINE_S, unique_topic
from .test_spark_support import create_topic, produce, spark

__all__ = ["spark"]

RECORDS = 30


def crashing_sink(spark: Any, *, commit_first: bool) -> str:
    """Register a sink that fails in `commit` (after committing when `commit_first`); returns
    its format name. Classes defined here are pickled by value, so Spark's workers load them."""
    # Imported here: test_spark_support skips this module when pyspark is missing.
    from moldau.spark.data_source import MoldauDataSource
    from moldau.spark.transactional_sink import TransactionalStreamWriter

    name = "moldau-crash-after-commit" if commit_first else "moldau-crash-before-commit"

    class CrashingWriter(TransactionalStreamWriter):
        def commit(self, messages: list[Any], batchId: int) -> None:
            if commit_first:
                super().commit(messages, batchId)
            raise RuntimeError(f"simulated driver crash in the commit of batch {batchId}")

        def abort(self, messages: list[Any], batchId: int) -> None:
            pass  # a dead driver aborts nothing

    class CrashingSink(MoldauDataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            writer = super().streamWriter(schema, overwrite)
            assert isinstance(writer, TransactionalStreamWriter)
            return CrashingWriter(writer.options)

    spark.dataSource.register(CrashingSink)
    return name


def copy_topic(
    spark: Any, bootstrap: str, source: str, target: str, checkpoint: Path, *, sink: str
) -> Exception | None:
    """Copy `source` to `target` with an AvailableNow query; returns the query's failure."""
    from pyspark.errors import StreamingQueryException

    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format(sink)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    except StreamingQueryException as failure:  # raised when the query ended with an error
        return failure
    assert not query.isActive, "the AvailableNow query did not finish in 120s"
    return query.exception()


def values(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    """Every value of the 2-partition `topic` at `isolation_level` (no transaction may be open
    at read_committed: the reader stops at the last stable offset)."""
    tps = [TopicPartition(topic, p) for p in range(2)]
    settings = {"bootstrap.servers": bootstrap, "isolation.level": isolation_level}
    found: list[bytes] = []
    with SyncConsumer(settings) as consumer:
        consumer.assign(tps, dict.fromkeys(tps, OFFSET_BEGINNING))
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            messages = consumer.consume(10_000, 0.2)
            found += [m.value() or b"" for m in messages]
            if not messages and consumer.all_at_end():
                return sorted(found)
    raise AssertionError(f"{topic}: not read to its end within {DEADLINE_S}s")


def copy_with_a_crash(
    spark: Any, bootstrap: str, checkpoint: Path, *, commit_first: bool
) -> tuple[str, str, list[bytes]]:
    """Copy a new topic of RECORDS values through a sink that crashes in its commit; returns the
    source, the target and the values."""
    source, target = unique_topic("eos-in"), unique_topic("eos-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    written = [b"v%02d" % i for i in range(RECORDS)]
    produce(bootstrap, source, [(i % 2, b"k%d" % i, v) for i, v in enumerate(written)])
    crashing = crashing_sink(spark, commit_first=commit_first)
    failure = copy_topic(spark, bootstrap, source, target, checkpoint, sink=crashing)
    assert failure is not None and "simulated driver crash" in str(failure)
    return source, target, written


def test_a_batch_replayed_after_a_crash_before_its_commit_is_written_once(
    spark: Any, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    source, target, written = copy_with_a_crash(
        spark, bootstrap, tmp_path / "cp", commit_first=False
    )
    # The tasks wrote; their transactions are open (neither committed nor aborted).
    assert values(bootstrap, target, "read_uncommitted") == written

    assert copy_topic(spark, bootstrap, source, target, tmp_path / "cp", sink="moldau") is None
    assert values(bootstrap, target, "read_committed") == written
    # The first attempt's records stay in the log, aborted by the replay's InitProducerId.
    assert values(bootstrap, target, "read_uncommitted") == sorted(written * 2)

    more = [b"w%02d" % i for i in range(6)]
    produce(bootstrap, source, [(i % 2, None, v) for i, v in enumerate(more)])
    assert copy_topic(spark, bootstrap, source, target, tmp_path / "cp", sink="moldau") is None
    assert values(bootstrap, target, "read_committed") == sorted(written + more)


def test_a_batch_committed_but_missing_from_the_commit_log_is_not_written_again(
    spark: Any, server: MoldauServer, tmp_path: Path
) -> None:
    bootstrap = server.bootstrap_servers
    source, target, written = copy_with_a_crash(
        spark, bootstrap, tmp_path / "cp", commit_first=True
    )
    assert values(bootstrap, target, "read_committed") == written

    assert copy_topic(spark, bootstrap, source, target, tmp_path / "cp", sink="moldau") is None
    assert values(bootstrap, target, "read_uncommitted") == written  # nothing written twice
    assert values(bootstrap, target, "read_committed") == written


def dying_task_sink(spark: Any, flag: Path) -> str:
    """Register a sink whose task dies (its Python worker exits) after writing its rows into its
    open transaction, before the driver hears of it; only while `flag` does not exist yet."""
    from moldau.spark.data_source import MoldauDataSource
    from moldau.spark.transactional_sink import TransactionalStreamWriter

    marker = str(flag)

    class DyingWriter(TransactionalStreamWriter):
        def write(self, iterator: Any) -> Any:
            message = super().write(iterator)
            try:
                with open(marker, "x"):
                    pass
            except FileExistsError:
                return message
            import os

            os._exit(1)  # the task's process dies: no commit message, no abort

    class DyingSink(MoldauDataSource):
        @classmethod
        def name(cls) -> str:
            return "moldau-dying-task"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            writer = super().streamWriter(schema, overwrite)
            assert isinstance(writer, TransactionalStreamWriter)
            return DyingWriter(writer.options)

    spark.dataSource.register(DyingSink)
    return "moldau-dying-task"


def test_a_task_killed_after_writing_leaves_nothing_a_replay_duplicates(
    spark: Any, server: MoldauServer, tmp_path: Path
) -> None:
    """A task's process dies after its rows went out in its open transaction: the query fails,
    the restarted query replays the batch, the replay's InitProducerId aborts the dead task's
    transaction, and read_committed sees every row once."""
    bootstrap = server.bootstrap_servers
    source, target = unique_topic("eos-kill-in"), unique_topic("eos-kill-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    written = [b"k%02d" % i for i in range(RECORDS)]
    produce(bootstrap, source, [(i % 2, None, v) for i, v in enumerate(written)])
    dying = dying_task_sink(spark, tmp_path / "died")
    failure = copy_topic(spark, bootstrap, source, target, tmp_path / "cp", sink=dying)
    assert failure is not None and (tmp_path / "died").exists()

    assert copy_topic(spark, bootstrap, source, target, tmp_path / "cp", sink="moldau") is None
    assert values(bootstrap, target, "read_committed") == written
    uncommitted = values(bootstrap, target, "read_uncommitted")
    assert set(uncommitted) == set(written) and len(uncommitted) > len(written)  # aborted rows


def test_exactly_once_is_refused_for_batch_writes(spark: Any, server: MoldauServer) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    writer = (
        df.write.mode("append")
        .format("moldau")
        .option("kafka.bootstrap.servers", server.bootstrap_servers)
        .option("topic", "t")
        .option("exactlyOnce", "true")
    )
    with pytest.raises(Exception, match="applies to streaming writes only"):
        writer.save()
