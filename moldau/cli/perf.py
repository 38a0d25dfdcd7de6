"""`moldau perf produce | consume`: load tests printing Kafka's perf-test summary lines.

produce prints kafka-producer-perf-test's line: `N records sent, X records/sec (Y MB/sec), A ms avg
latency, M ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.`; consume prints
kafka-consumer-perf-test's header and values. Both show a live progress bar on stderr.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from moldau.cli.common import (
    BootstrapOption,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    emit,
    fail,
    run,
    stderr,
)
from moldau.client.consumer import OFFSET_BEGINNING, Consumer
from moldau.client.errors import KafkaException
from moldau.client.producer import Producer, RecordMetadata
from moldau.types import TopicPartition

app = typer.Typer(help="Measure produce and consume throughput.", no_args_is_help=True)

CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProducerSummary:
    records: int
    records_per_second: float
    mb_per_second: float
    average_latency_ms: float
    max_latency_ms: float
    percentiles_ms: tuple[int, int, int, int]

    def line(self) -> str:
        p50, p95, p99, p999 = self.percentiles_ms
        return (
            f"{self.records} records sent, {self.records_per_second:.1f} records/sec "
            f"({self.mb_per_second:.2f} MB/sec), {self.average_latency_ms:.2f} ms avg latency, "
            f"{self.max_latency_ms:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
            f"{p99} ms 99th, {p999} ms 99.9th."
        )


def summarize(
    latencies_ms: Sequence[float], *, bytes_sent: int, elapsed_s: float
) -> ProducerSummary:
    """Kafka's summary: percentiles are the latency at index int(count * p) of the sorted list."""
    ordered = sorted(latencies_ms)
    count = len(ordered)
    elapsed_s = max(elapsed_s, 1e-9)

    def percentile(p: float) -> int:
        return int(ordered[min(int(count * p), count - 1)]) if count else 0

    return ProducerSummary(
        records=count,
        records_per_second=count / elapsed_s,
        mb_per_second=bytes_sent / _MB / elapsed_s,
        average_latency_ms=sum(ordered) / count if count else 0.0,
        max_latency_ms=ordered[-1] if count else 0.0,
        percentiles_ms=(percentile(0.5), percentile(0.95), percentile(0.99), percentile(0.999)),
    )


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    )


@app.command("produce")
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.", show_default=False)],
    num_records: Annotated[
        int, typer.Option("--num-records", "-n", help="Records to send.")
    ] = 100_000,
    record_size: Annotated[int, typer.Option("--record-size", "-s", help="Value bytes.")] = 100,
    throughput: Annotated[
        int, typer.Option("--throughput", help="Records/sec cap (-1: no cap).")
    ] = -1,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all.")] = "all",
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Send records as fast as allowed and report throughput and latency."""
    if num_records <= 0 or record_size < 0:
        fail("--num-records must be positive and --record-size not negative")
    client = client_config(bootstrap, settings, acks=acks, linger_ms=5)
    payload = os.urandom(record_size)

    async def body() -> None:
        latencies: list[float] = []
        failures: list[KafkaException] = []
        async with Producer(client) as producer:
            await producer.cluster.topic(topic)
            start = time.perf_counter()
            with _progress() as progress:
                task = progress.add_task("produce", total=num_records, rate="")

                for index in range(num_records):
                    sent_at = time.perf_counter()

                    def on_delivery(
                        error: KafkaException | None,
                        _metadata: RecordMetadata,
                        sent_at: float = sent_at,
                    ) -> None:
                        if error is not None:
                            failures.append(error)
                        else:
                            latencies.append((time.perf_counter() - sent_at) * 1000)

                    producer.produce(topic, payload, on_delivery=on_delivery)
                    if throughput > 0:
                        ahead = (index + 1) / throughput - (time.perf_counter() - start)
                        if ahead > 0:
                            await asyncio.sleep(ahead)
                    if len(producer) >= 50_000 or index % 5000 == 4999:
                        if len(producer) >= 50_000:
                            await producer.flush()
                        else:
                            await asyncio.sleep(0)
                        done = len(latencies)
                        elapsed = time.perf_counter() - start
                        progress.update(task, completed=done, rate=f"{done / elapsed:,.0f} rec/s")
                    if failures:
                        raise failures[0]
                await producer.flush()
                progress.update(task, completed=len(latencies))
            elapsed = time.perf_counter() - start
        if failures:
            raise failures[0]
        summary = summarize(latencies, bytes_sent=len(latencies) * record_size, elapsed_s=elapsed)
        emit(
            {
                "records": summary.records,
                "records_per_sec": round(summary.records_per_second, 1),
                "mb_per_sec": round(summary.mb_per_second, 2),
                "avg_latency_ms": round(summary.average_latency_ms, 2),
                "max_latency_ms": round(summary.max_latency_ms, 2),
                "p50_ms": summary.percentiles_ms[0],
                "p95_ms": summary.percentiles_ms[1],
                "p99_ms": summary.percentiles_ms[2],
                "p999_ms": summary.percentiles_ms[3],
            },
            output,
            summary.line(),
        )

    run(body())


def _kafka_time(moment: float) -> str:
    stamp = datetime.datetime.fromtimestamp(moment)
    return stamp.strftime("%Y-%m-%d %H:%M:%S:") + f"{stamp.microsecond // 1000:03d}"


@app.command("consume")
def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.", show_default=False)],
    messages: Annotated[int, typer.Option("--messages", "-n", help="Records to read.")] = 100_000,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Give up after this many idle seconds.")
    ] = 10.0,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Read records from the beginning and report throughput (kafka-consumer-perf-test)."""
    if messages <= 0:
        fail("--messages must be positive")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with Consumer(client) as consumer:
            info = await consumer.cluster.topic(topic)
            partitions = [TopicPartition(topic, p) for p in info.partitions]
            consumer.assign(partitions, dict.fromkeys(partitions, OFFSET_BEGINNING))
            start_wall = time.time()
            start = time.perf_counter()
            count = 0
            size = 0
            last_progress = time.perf_counter()
            with _progress() as progress:
                task = progress.add_task("consume", total=messages, rate="")
                while count < messages:
                    batch = await consumer.consume(min(1000, messages - count), 1.0)
                    now = time.perf_counter()
                    if not batch:
                        if now - last_progress > timeout:
                            break
                        continue
                    last_progress = now
                    count += len(batch)
                    size += sum(len(m.value() or b"") + len(m.key() or b"") for m in batch)
                    progress.update(
                        task, completed=count, rate=f"{count / (now - start):,.0f} rec/s"
                    )
            elapsed = max(time.perf_counter() - start, 1e-9)
        if count < messages:
            stderr.print(
                f"WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({timeout * 1000:.0f} ms) exceeded. You can use the --timeout option to "
                "increase the timeout."
            )
        mb = size / _MB
        # The text line is Kafka's (CONSUMER_HEADER); JSON keys are snake_case as perf produce's.
        values: dict[str, Any] = {
            "start_time": _kafka_time(start_wall),
            "end_time": _kafka_time(start_wall + elapsed),
            "data_consumed_mb": round(mb, 4),
            "mb_per_sec": round(mb / elapsed, 4),
            "records": count,
            "records_per_sec": round(count / elapsed, 4),
            "rebalance_time_ms": 0,
            "fetch_time_ms": round(elapsed * 1000),
            "fetch_mb_per_sec": round(mb / elapsed, 4),
            "fetch_records_per_sec": round(count / elapsed, 4),
        }
        line = ", ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in values.values())
        emit(values, output, f"{CONSUMER_HEADER}\n{line}")

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="perf")
