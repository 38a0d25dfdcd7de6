"""Disk faults for the chaos suite, on a node's own data directory:

- `torn-tail`: SIGKILL the node, then cut every partition log it holds inside its last batch
  (a write torn by a power loss: the segment ends in the middle of a batch), and start it again.
  The node must find the torn batch, truncate it, and fetch back what it lost from the leader;
  it must not lead, or count toward `min.insync.replicas`, with what it no longer has.
- `disk-full`: fill the node's data directory (a tmpfs of its own, `Disks`) until writes fail
  with ENOSPC, hold, then free the space. The node answers KAFKA_STORAGE_ERROR meanwhile and comes
  back by its periodic re-check, without a restart.
- `disk-eio`: make the node's storage fail with EIO (`fsync EIO` or `write EIO`, as the seed
  chooses) through the storage seam (`MOLDAU_STORAGE_FAULTS`, moldau/storage/fault_injection.py).
  Its only log dir fails, so the node halts (exit 1, as Kafka's broker with every log dir
  failed); the nemesis waits for that exit and starts it again, faults cleared, at healing.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

TORN_TAIL = "torn-tail"
DISK_FULL = "disk-full"
DISK_EIO = "disk-eio"
DISK_FAULTS = (TORN_TAIL, DISK_FULL, DISK_EIO)

DISK_BYTES = 96 * 1024 * 1024  # each node's tmpfs for disk-full
FILLER = "chaos-filler"
HALT_TIMEOUT_S = 30.0  # a node with failing fsyncs halts within a checkpoint interval (5 s)
_BATCH_HEADER = 12  # base offset (8) and batch length (4)


class DiskUnavailable(RuntimeError):
    """What the scenario needs cannot be had here (not root: no tmpfs)."""


@contextmanager
def node_disks(directory: Path, node_ids: list[int]) -> Iterator[list[Path]]:
    """A tmpfs of DISK_BYTES at `directory`/node-N for each node (where build_cluster puts its
    data), unmounted on leaving; what a disk held is copied to node-N-data first, so a failing
    run's data stays for the post-mortem (removed with the run's directory otherwise)."""
    mounted: list[Path] = []
    try:
        for node_id in node_ids:
            mount_point = directory / f"node-{node_id}"
            mount_point.mkdir(parents=True, exist_ok=True)
            result = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                raise DiskUnavailable(f"cannot mount a tmpfs (needs root): {result.stderr.strip()}")
            mounted.append(mount_point)
        yield mounted
    finally:
        for mount_point in mounted:
            (mount_point / FILLER).unlink(missing_ok=True)
            shutil.copytree(mount_point, mount_point.with_name(mount_point.name + "-data"))
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(data_dir: Path) -> int:
    """Write zeros to a filler file until the disk refuses them; the bytes written."""
    written = 0
    with open(data_dir / FILLER, "wb", buffering=0) as filler:
        try:
            while True:
                written += filler.write(bytes(1 << 16))
        except OSError:
            pass
    return written


def free(data_dir: Path) -> None:
    (data_dir / FILLER).unlink(missing_ok=True)


def control_file(cluster: Cluster, node_id: int) -> Path:
    """The node's storage-fault control file (beside its data, outside any tmpfs)."""
    return cluster.nodes[node_id].data_dir.with_name(f"node-{node_id}.storage-faults")


def inject_faults(cluster: Cluster) -> None:
    """Before the first launch: every node reads its storage faults from its control file."""
    for node_id, node in cluster.nodes.items():
        node.environment["MOLDAU_STORAGE_FAULTS"] = str(control_file(cluster, node_id))


def fail_storage(cluster: Cluster, node_id: int, operation: str) -> None:
    control_file(cluster, node_id).write_text(f"{operation} EIO\n")


def clear_storage_faults(cluster: Cluster, node_id: int) -> None:
    control_file(cluster, node_id).unlink(missing_ok=True)


def wait_for_halt(cluster: Cluster, node_id: int) -> int:
    """The exit code of a node expected to halt on its own (TimeoutError if it does not)."""
    server = cluster.nodes[node_id].server
    assert server is not None
    try:
        return server.wait_exited(HALT_TIMEOUT_S)
    except pytest.fail.Exception as failure:  # (the runner records errors, not test failures)
        raise TimeoutError(str(failure)) from None


def tear_tails(data_dir: Path, rng: random.Random) -> list[tuple[str, int, int]]:
    """Cut each partition's last segment inside its last batch (a killed node's files only).
    Returns (partition directory, size before, size after) for every cut made."""
    torn = []
    for partition_dir in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if partition_dir.name.startswith("__cluster_metadata"):
            continue  # the metadata quorum's log is fsynced before it is acknowledged
        segments = sorted(partition_dir.glob("*.log"))
        if not segments:
            continue
        segment = segments[-1]
        size = segment.stat().st_size
        last = _last_batch_start(segment.read_bytes())
        if last is None or size - last < 2:
            continue
        cut = last + rng.randrange(1, size - last)
        with open(segment, "r+b") as file:
            file.truncate(cut)
        torn.append((partition_dir.name, size, cut))
    return torn


def _last_batch_start(data: bytes) -> int | None:
    position, last = 0, None
    while position + _BATCH_HEADER <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        if length <= 0 or position + _BATCH_HEADER + length > len(data):
            break
        last = position
        position += _BATCH_HEADER + length
    return last
