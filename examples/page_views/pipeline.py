"""Page views per page per 10 seconds, end to end on Moldau and local Spark.

    python examples/page_views/pipeline.py [--seconds 20] [--rate 500] [--master local[2]]
                                           [--nodes 3] [--format kafka]

Starts an embedded Moldau node on a temporary directory (or, with `--nodes N`, a local cluster of
N nodes through `moldau cluster up`, the pipeline's topics replicated on up to three of them,
acks=all with min.insync.replicas 2), starts the Spark job of `job.py`, runs
the generator of `events.py` in real time while a consumer follows the results topic, then waits
for Spark to catch up, prints the latest windows and a summary, checks every window's count
against what the generator sent, and stops everything. Exit status 0 means the counts matched.
With `--format kafka` the job reads and writes through Spark's own Kafka connector
(`format("kafka")`, the jars `scripts/setup.sh` resolves into tests/java/spark-kafka/lib/)
instead of `format("moldau")`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # tests.spark_kafka

import events as event_generator
import job

import moldau
from moldau.client import (
    OFFSET_BEGINNING,
    NewTopic,
    SyncAdminClient,
    SyncConsumer,
    TopicPartition,
)
from tests import spark_kafka

EVENTS_TOPIC = "page-events"
RESULTS_TOPIC = "page-view-counts"


class ResultsFollower(threading.Thread):
    """Reads the results topic; keeps the latest count of every (window, page)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="results-follower", daemon=True)
        self.bootstrap = bootstrap
        self.latest: dict[tuple[str, str], dict] = {}
        self.records = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        tp = TopicPartition(RESULTS_TOPIC, 0)
        with SyncConsumer({"bootstrap.servers": self.bootstrap}) as consumer:
            consumer.assign([tp], {tp: OFFSET_BEGINNING})
            while True:
                messages = consumer.consume(1000, 0.5)
                for message in messages:
                    row = json.loads(message.value())
                    self.latest[(row["window_start"], row["page"])] = row
                    self.records += 1
                if not messages and self.stopping.is_set() and consumer.all_at_end():
                    return


def spark_session(master: str, data_format: str):
    import pyspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # local-cluster[...] launches executor JVMs through SPARK_HOME's bin/ scripts and jars, which
    # the pyspark package ships
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    from pyspark.sql import SparkSession

    from moldau.spark import register

    # format("kafka") needs the connector's jars when the JVM starts (checked in main)
    jars = (spark_kafka.spark_jars() or "") if data_format == "kafka" else ""
    spark = (
        SparkSession.builder.master(master)
        .appName("moldau-page-views")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def processed_rows(query) -> tuple[int, float, int]:
    """(rows read, seconds spent in batches, batches) over the query's recent progress."""
    progress = [p for p in query.recentProgress if p.get("numInputRows") is not None]
    rows = sum(p["numInputRows"] for p in progress)
    seconds = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return rows, seconds, len(progress)


def print_table(latest: dict[tuple[str, str], dict], windows: int = 3) -> None:
    starts = sorted({start for start, _ in latest})[-windows:]
    pages = sorted({page for _, page in latest})
    print(f"\n  {'page':<10}" + "".join(f"{start:>12}" for start in starts))
    for page in pages:
        cells = [latest.get((start, page), {}).get("views", 0) for start in starts]
        print(f"  {page:<10}" + "".join(f"{cell:>12}" for cell in cells))
    print(f"  (views per 10-second window, UTC, the latest {len(starts)} windows)\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to generate events")
    parser.add_argument("--rate", type=int, default=500, help="events per second")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument(
        "--nodes", type=int, default=1, help="Moldau nodes: 1 embedded, or a local cluster of N"
    )
    parser.add_argument(
        "--format",
        dest="data_format",
        choices=("moldau", "kafka"),
        default="moldau",
        help="the job's source and sink: Moldau's data source, or Spark's own Kafka connector",
    )
    args = parser.parse_args()
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    if args.data_format == "kafka" and (reason := spark_kafka.unavailable()) is not None:
        parser.error(reason)

    with tempfile.TemporaryDirectory(prefix="moldau-page-views-") as temporary:
        work = Path(temporary)
        with moldau_nodes(work, args.nodes) as bootstrap:
            replication = min(args.nodes, 3)
            configs = {"min.insync.replicas": "2"} if replication == 3 else {}
            with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topics(
                    [
                        NewTopic(EVENTS_TOPIC, 3, replication, config=configs),
                        NewTopic(RESULTS_TOPIC, 1, replication, config=configs),
                    ]
                )
            print(
                f"      ready at {bootstrap}; topics {EVENTS_TOPIC} (3), {RESULTS_TOPIC} (1), "
                f"replication factor {replication}"
            )
            print(
                f"[2/5] starting Spark ({args.master}) and the streaming job, "
                f'format("{args.data_format}")'
            )
            spark = spark_session(args.master, args.data_format)
            try:
                return run(spark, bootstrap, work, args)
            finally:
                spark.stop()
                print("[5/5] stopped Spark and Moldau")


@contextlib.contextmanager
def moldau_nodes(work: Path, nodes: int) -> Iterator[str]:
    """The bootstrap list of an embedded single node, or of `moldau cluster up --nodes N` (a
    child process that stops its nodes on SIGTERM)."""
    if nodes == 1:
        print(f"[1/5] starting a single-node Moldau (data in {work / 'data'})")
        with moldau.Server(log_dirs=work / "data") as server:
            yield server.bootstrap_servers
        return
    data_dir = work / "cluster"
    print(f"[1/5] starting a {nodes}-node Moldau cluster (data and logs in {data_dir})")
    command = [sys.executable, "-m", "moldau", "cluster", "up", "--nodes", str(nodes)]
    cluster = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert cluster.stdout is not None
        for line in cluster.stdout:
            ready = re.search(r"cluster ready: bootstrap.servers=(\S+)", line)
            if ready:
                break
        else:
            raise SystemExit(f"the cluster did not start (exit code {cluster.wait()})")
        yield ready.group(1)
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(timeout=90)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()


def run(spark, bootstrap: str, work: Path, args: argparse.Namespace) -> int:
    query = job.start(
        spark,
        bootstrap=bootstrap,
        events_topic=EVENTS_TOPIC,
        results_topic=RESULTS_TOPIC,
        parquet_dir=str(work / "parquet"),
        checkpoint_dir=str(work / "checkpoint"),
        data_format=args.data_format,
    )
    follower = ResultsFollower(bootstrap)
    follower.start()
    deadline = time.monotonic() + 120
    while query.lastProgress is None and time.monotonic() < deadline:  # the first, empty batch
        time.sleep(0.2)
    print(f"[3/5] generating page events for {args.seconds:.0f}s at {args.rate}/s")

    def report(sent: event_generator.GeneratedEvents) -> None:
        rows, _seconds, batches = processed_rows(query)
        print(
            f"      sent {sent.events:>6} events | Spark read {rows:>6} in {batches:>3} batches"
            f" | {follower.records:>5} result records"
        )

    sent = event_generator.generate(
        bootstrap, EVENTS_TOPIC, seconds=args.seconds, events_per_second=args.rate, progress=report
    )
    print("[4/5] waiting for Spark to read everything")
    deadline = time.monotonic() + 120
    while processed_rows(query)[0] < sent.events and time.monotonic() < deadline:
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.5)
    time.sleep(3)  # one more trigger writes the last updates
    query.stop()
    follower.stopping.set()
    follower.join(30)

    rows, busy_seconds, batches = processed_rows(query)
    print_table(follower.latest)
    expected = {key: count for key, count in sent.views.items()}
    got = {key: row["views"] for key, row in follower.latest.items()}
    parquet_rows = spark.read.parquet(str(work / "parquet")).count()
    print("Summary")
    print(f"  records in   {sent.events} events ({sent.events / sent.seconds:.0f}/s produced)")
    print(f"  Spark        {rows} rows in {batches} micro-batches", end="")
    print(f" ({rows / busy_seconds:.0f} rows/s while busy)" if busy_seconds else "")
    print(f"  records out  {follower.records} window updates to {RESULTS_TOPIC}, ", end="")
    print(f"{parquet_rows} Parquet rows, {len(got)} (window, page) counts")
    if got == expected and rows == sent.events:
        print(
            f"  check        every window's view count matches the generator ({sum(got.values())} views)"
        )
        print("pipeline OK")
        return 0
    missing = {k: (expected.get(k), got.get(k)) for k in expected.keys() | got.keys()}
    wrong = {k: v for k, v in missing.items() if v[0] != v[1]}
    print(f"  check        FAILED: {len(wrong)} windows differ, e.g. {list(wrong.items())[:3]}")
    print("pipeline FAILED")
    return 1


if __name__ == "__main__":
    sys.exit(main())
