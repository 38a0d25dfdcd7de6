"""A log directory that runs out of space, on a real server over a small tmpfs: writes answer
KAFKA_STORAGE_ERROR (offset commits COORDINATOR_NOT_AVAILABLE, topic creation
KAFKA_STORAGE_ERROR), nothing acknowledged is lost, reads go on, DescribeLogDirs reports the
directory, SIGTERM exits 0, the node starts again on the full disk and serves reads, and once
space returns a re-check brings the directory back without a restart. A healthy client is
answered within a second throughout and RSS stays bounded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.coordinator.runtime import partition_for_group
from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import NewRecord, build_batch, iter_batches

from .conftest import ServerFactory, _in_ci
from .support import wait_until
from .wire import (
    Connection,
    ResponsivenessProbe,
    commit_offset,
    create_topics,
    describe_log_dirs,
    fetch,
    find_coordinator,
    produce,
    rss_bytes,
)

DISK_BYTES = 24 * 1024 * 1024
RSS_BOUND_BYTES = 250 * 1024 * 1024
STORAGE_ERROR = ErrorCode.kafka_storage_error


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs, unmounted at teardown (after the test's servers stopped)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        reason = f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}"
        if _in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> None:
    """Write zeros until the disk refuses them."""
    with open(disk / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(4096))
        except OSError:
            pass


def values(records: bytes) -> list[bytes | None]:
    return [r.value for batch in iter_batches(records) for r in decode_records(batch.data)]


def fresh_group(avoid: str) -> str:
    """A group whose `__consumer_offsets` partition differs from `avoid`'s (so its log is empty
    and its first commit needs new space)."""
    taken = partition_for_group(avoid, 50)
    return next(f"g-{i}" for i in range(1000) if partition_for_group(f"g-{i}", 50) != taken)


def big_batch() -> bytes:
    return build_batch([NewRecord(key=None, value=bytes(256 * 1024))], timestamp=0)


def test_a_full_disk_refuses_writes_serves_reads_and_comes_back(
    small_disk: Path, start_server: ServerFactory
) -> None:
    data_dir = small_disk / "data"
    server = start_server(log_dirs=str(data_dir), log_dir_recheck_interval_ms="200")
    group = fresh_group("before")
    with Connection(server.host, server.port) as connection:
        [created] = create_topics(connection, {"events": 1})
        assert created.error_code == ErrorCode.none
        for index in range(20):
            batch = build_batch([NewRecord(key=None, value=b"acked %d" % index)], timestamp=0)
            assert produce(connection, "events", 0, batch).error_code == 0
        assert find_coordinator(connection, "before").error_code == 0
        assert commit_offset(connection, "before", "events", 0, 5).error_code == 0

    fill(small_disk)
    with (
        ResponsivenessProbe(server.host, server.port) as probe,
        Connection(server.host, server.port) as connection,
    ):
        assert produce(connection, "events", 0, big_batch()).error_code == STORAGE_ERROR
        read = fetch(connection, "events", 0, 0, max_bytes=1 << 20)
        assert read.error_code == 0
        assert values(read.records) == [b"acked %d" % i for i in range(20)]
        [log_dir] = describe_log_dirs(connection)
        assert log_dir.error_code == STORAGE_ERROR
        assert commit_offset(connection, group, "events", 0, 7).error_code == (
            ErrorCode.coordinator_not_available
        )
        [refused] = create_topics(connection, {"more": 1})
        assert refused.error_code == STORAGE_ERROR
        assert rss_bytes(server.process.pid) < RSS_BOUND_BYTES  # type: ignore[union-attr]
    probe.check()

    server.restart()  # SIGTERM on the full disk must exit 0; then start on it
    assert "cannot start" not in server.output_tail(400)
    with (
        ResponsivenessProbe(server.host, server.port) as probe,
        Connection(server.host, server.port) as connection,
    ):
        read = fetch(connection, "events", 0, 0, max_bytes=1 << 20)
        assert read.error_code == 0
        assert values(read.records) == [b"acked %d" % i for i in range(20)]
        assert produce(connection, "events", 0, big_batch()).error_code == STORAGE_ERROR

        os.remove(small_disk / "filler")
        wait_until(
            lambda: describe_log_dirs(connection)[0].error_code == ErrorCode.none,
            timeout=10,
            message="the log dir did not come back online",
        )
        appended = produce(connection, "events", 0, big_batch())
        assert (appended.error_code, appended.base_offset) == (0, 20)
        wait_until(
            lambda: commit_offset(connection, group, "events", 0, 7).error_code == 0,
            timeout=10,
            message="offset commits did not recover",
        )
        [created] = create_topics(connection, {"more": 1})
        assert created.error_code == ErrorCode.none
    probe.check()
