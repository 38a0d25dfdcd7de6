"""Requests for more partitions than a node can take, and more partitions than it has file
descriptors: refused at once with Kafka's error, or served with a bounded number of open files,
while a healthy client keeps getting answers within a second and RSS stays bounded.

The long versions (20,000 partitions, the probe's slowest answer meanwhile) are
`bench/partitions.py`; these take seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import NewRecord, build_batch

from .conftest import ServerFactory
from .wire import (
    Connection,
    ResponsivenessProbe,
    create_partitions,
    create_topics,
    fetch,
    produce,
    rss_bytes,
)

INT32_MAX = 2**31 - 1
RSS_BOUND_BYTES = 250 * 1024 * 1024  # an idle broker is ~60 MB; 600 partitions add ~4 MB


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_requests_for_int32_max_partitions_are_refused_at_once(
    start_server: ServerFactory,
) -> None:
    server = start_server(max_broker_partitions="400")
    with (
        ResponsivenessProbe(server.host, server.port) as probe,
        Connection(server.host, server.port) as connection,
    ):
        started = time.monotonic()
        [huge] = create_topics(connection, {"huge": INT32_MAX})
        assert (huge.error_code, huge.error_message) == (
            ErrorCode.policy_violation,
            "Excessively large number of partitions per request.",
        )
        [ok] = create_topics(connection, {"small": 1})
        assert ok.error_code == ErrorCode.none
        grown = create_partitions(connection, "small", INT32_MAX)
        assert grown.error_code == ErrorCode.policy_violation
        assert time.monotonic() - started < 2.0
        # 1 + 250 fit under 400 (no internal topic yet: they come with the first group); 200
        # more do not
        [wide] = create_topics(connection, {"wide": 250})
        assert wide.error_code == ErrorCode.none
        [over] = create_topics(connection, {"over": 200})
        assert over.error_code == ErrorCode.policy_violation
        assert "max.broker.partitions=400" in over.error_message
        assert create_partitions(connection, "wide", 400).error_code == ErrorCode.policy_violation
        assert rss_bytes(server.process.pid) < RSS_BOUND_BYTES  # type: ignore[union-attr]
    probe.check()


def test_more_partitions_than_descriptors_are_served_and_survive_a_restart(
    start_server: ServerFactory,
) -> None:
    # 512 descriptors: 128 for segment files (half of what is left after 256 reserved), while
    # 500 partitions have 2,000 segment files.
    limit = 512
    server = start_server(open_files_limit=limit)
    partitions = 500
    records = {
        p: build_batch([NewRecord(key=None, value=b"p%d" % p)], timestamp=0)
        for p in range(partitions)
    }
    with Connection(server.host, server.port) as connection:
        [created] = create_topics(connection, {"wide": partitions})
        assert created.error_code == ErrorCode.none
        for partition in range(partitions):
            assert produce(connection, "wide", partition, records[partition]).error_code == 0
    assert open_descriptors(server.process.pid) < limit  # type: ignore[union-attr]
    server.restart()
    with (
        ResponsivenessProbe(server.host, server.port) as probe,
        Connection(server.host, server.port) as connection,
    ):
        for partition in range(partitions):
            data = fetch(connection, "wide", partition, 0, max_bytes=4096)
            assert data.error_code == 0 and b"p%d" % partition in data.records
        assert open_descriptors(server.process.pid) < limit  # type: ignore[union-attr]
        assert rss_bytes(server.process.pid) < RSS_BOUND_BYTES  # type: ignore[union-attr]
    probe.check()


def test_open_files_that_cannot_fit_stop_the_node_with_one_line(tmp_path) -> None:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))

    completed = subprocess.run(
        [sys.executable, "-m", "moldau", "server",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path}",
         "--override", "log.open.files.max=100000"],
        capture_output=True, text=True, timeout=60, preexec_fn=limit,
    )  # fmt: skip
    assert completed.returncode == 1
    errors = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: cannot start the server: log.open.files.max=100000 does not fit: RLIMIT_NOFILE "
        "is 512 (hard limit 512) and 256 are kept for connections and the metadata log; lower "
        "log.open.files.max to at most 256 or raise the limit (ulimit -n)"
    ]
