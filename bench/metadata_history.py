"""Start-up time and memory of a node against the length of its metadata history, with and without
metadata snapshots (KIP-630).

    .venv/bin/python bench/metadata_history.py [--history-mb 25 50 100 200] [--live-topics 1000]
        [--starts 3] [--image-topics 1000 10000 50000] [--dir DIR]

For each history size: a metadata log is written in-process through the controller (snapshots
off) by churning topics (create 500 topics of one partition, delete them, again) until the log
holds that many MB, then `--live-topics` topics are created and kept, so every history ends in
the same image. Two copies of that data directory are started as `moldau server` processes:

- whole log: `metadata.log.max.record.bytes.between.snapshots` set out of reach, so every start
  replays the whole history (what every start did before snapshots);
- snapshots: the defaults (20 MiB, 1 h); a first start replays the history, writes a snapshot
  and trims the log, and the measured starts load the snapshot and the short tail.

Each copy is started once unmeasured (the first start also creates the live topics' partition
logs), then `--starts` times measured: seconds from launch to the ready line, VmRSS one second
after it and VmHWM (peak RSS) of the process, and what `__cluster_metadata-0` holds on disk.

Then, in-process, the cost of a snapshot against the size of the image (`--image-topics`, each
with 3 partitions of 3 replicas and a config): encoding it (what the snapshot thread does) and
decoding it into an image (what a start or an installed snapshot does), and its size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from _harness import READY, header

from moldau.clock import ManualClock
from moldau.config.values import BrokerConfig
from moldau.controller import QuorumController
from moldau.controller.operations import BrokerRegistration, NewTopic
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.metadata.snapshot import decode_snapshot, encode_snapshot

WHOLE_LOG = "1000000000000000"
CHURN_BATCH = 500


def metadata_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "__cluster_metadata-0")


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))


async def write_history(data_dir: str, megabytes: int, live_topics: int) -> int:
    """Churn topics until the metadata log holds `megabytes`; returns the records written."""
    config = BrokerConfig(
        {
            "log.dirs": data_dir,
            "node.id": "1",
            "metadata.log.max.record.bytes.between.snapshots": WHOLE_LOG,
        }
    )
    registration = BrokerRegistration(
        broker_id=1,
        incarnation_id=uuid.uuid4(),
        endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092)],
        is_controller=True,
    )
    controller = await QuorumController.open(config, ManualClock(), registration=registration)
    log_path = os.path.join(metadata_dir(data_dir), "metadata.log")
    round_number = 0
    while os.path.getsize(log_path) < megabytes * 1024 * 1024:
        names = [f"churn-{round_number}-{i}" for i in range(CHURN_BATCH)]
        results = await controller.create_topics(
            [NewTopic(name=name, num_partitions=1) for name in names]
        )
        if any(result.error_code for result in results):
            raise RuntimeError(f"creating topics failed: {results[0]}")
        await controller.delete_topics(names)
        round_number += 1
    for first in range(0, live_topics, CHURN_BATCH):
        last = min(first + CHURN_BATCH, live_topics)
        await controller.create_topics(
            [NewTopic(name=f"live-{i}", num_partitions=1) for i in range(first, last)]
        )
    records = controller.image.offset + 1
    await controller.stop()
    return records


def start_node(data_dir: str, *overrides: str) -> tuple[subprocess.Popen[str], float]:
    """Launch `moldau server` on `data_dir`; returns it once ready, with the seconds that took."""
    arguments = [sys.executable, "-m", "moldau", "server", "--log-level", "WARNING"]
    for setting in (f"log.dirs={data_dir}", "listeners=PLAINTEXT://127.0.0.1:0", *overrides):
        arguments += ["--override", setting]
    started = time.perf_counter()
    process = subprocess.Popen(
        arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        if READY.search(line):
            return process, time.perf_counter() - started
        lines.append(line)
    output = "".join(lines[-20:])
    raise RuntimeError(f"moldau server exited with {process.wait()} before it was ready:\n{output}")


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    if process.wait(120) != 0:
        raise RuntimeError(f"moldau server exited with {process.returncode}")


def measure(data_dir: str, starts: int, *overrides: str) -> dict[str, float]:
    process, _ = start_node(data_dir, *overrides)  # unmeasured: partitions created, snapshot
    time.sleep(2)  # let a due snapshot finish before the clean stop
    stop(process)
    seconds, rss, peak = [], [], []
    for _ in range(starts):
        process, elapsed = start_node(data_dir, *overrides)
        time.sleep(1)
        now, high = memory(process.pid)
        stop(process)
        seconds.append(elapsed)
        rss.append(now)
        peak.append(high)
    return {
        "start_s": statistics.median(seconds),
        "rss_mb": statistics.median(rss) / 2**20,
        "peak_mb": statistics.median(peak) / 2**20,
        "metadata_mb": directory_bytes(metadata_dir(data_dir)) / 2**20,
    }


def image_of(topics: int) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("bench"))
    for broker_id in (1, 2, 3):
        delta.replay(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=uuid.uuid4(),
                broker_epoch=broker_id,
                endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9091),),
                fenced=False,
            )
        )
    for index in range(topics):
        topic_id = uuid.uuid4()
        delta.replay(TopicRecord(name=f"topic-{index}", topic_id=topic_id))
        delta.replay(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=f"topic-{index}",
                name="retention.ms",
                value="86400000",
            )
        )
        for partition in range(3):
            replicas = tuple((partition + i) % 3 + 1 for i in range(3))
            delta.replay(
                PartitionRecord(
                    topic_id=topic_id,
                    partition=partition,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
    delta.set_offset(1000)
    return delta.build_image()


def measure_images(sizes: list[int]) -> None:
    print(f"\n{'topics':>8} {'partitions':>10} | {'encode s':>8} {'decode s':>8} {'size MB':>8}")
    for topics in sizes:
        image = image_of(topics)
        started = time.perf_counter()
        contents = encode_snapshot(image)
        encoded = time.perf_counter() - started
        started = time.perf_counter()
        decoded = decode_snapshot(contents, cluster_id="bench", offset=1000)
        decode_s = time.perf_counter() - started
        assert decoded == image
        print(
            f"{topics:>8} {3 * topics:>10} | {encoded:>8.2f} {decode_s:>8.2f} "
            f"{len(contents) / 2**20:>8.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history-mb", type=int, nargs="*", default=[25, 50, 100, 200])
    parser.add_argument("--live-topics", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--image-topics", type=int, nargs="*", default=[1000, 10000, 50000])
    args = parser.parse_args()
    header("metadata history: start-up and memory, whole log against snapshots")
    base = tempfile.mkdtemp(prefix="moldau-history-", dir=args.dir)
    try:
        print(
            f"{'history':>9} {'records':>9} | {'mode':<10} {'start s':>8} {'RSS MB':>7} "
            f"{'peak MB':>8} {'on disk MB':>10}"
        )
        for megabytes in args.history_mb:
            template = os.path.join(base, f"history-{megabytes}")
            began = time.perf_counter()
            records = asyncio.run(write_history(template, megabytes, args.live_topics))
            written_s = time.perf_counter() - began
            for mode, overrides in (
                ("whole log", (f"metadata.log.max.record.bytes.between.snapshots={WHOLE_LOG}",)),
                ("snapshots", ()),
            ):
                copy = f"{template}-{mode.replace(' ', '-')}"
                shutil.copytree(template, copy)
                figures = measure(copy, args.starts, *overrides)
                print(
                    f"{megabytes:>6} MB {records:>9} | {mode:<10} {figures['start_s']:>8.2f} "
                    f"{figures['rss_mb']:>7.0f} {figures['peak_mb']:>8.0f} "
                    f"{figures['metadata_mb']:>10.1f}",
                    flush=True,
                )
                shutil.rmtree(copy)
            shutil.rmtree(template)
            print(f"{'':>20}(history written in {written_s:.0f} s)", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.image_topics:
        measure_images(args.image_topics)


if __name__ == "__main__":
    main()
