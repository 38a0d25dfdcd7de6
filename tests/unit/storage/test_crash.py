"""Crash test on a real directory: a forked child appends and flushes; SIGKILL lands at random
moments.

After every kill the log is recovered and checked: every offset the child reported flushed is
present, every batch is byte-identical to what was appended (base offset and epoch rewritten),
nothing corrupt is readable and offsets are contiguous from 0.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import struct
import time

import pytest

from moldau.protocol.records import iter_batches
from moldau.storage.log_manager import LogManager

from .crash_child import CONFIG, TP, expected_batch, record_count, run

KILLS = 60
BATCHES_PER_RUN = 2000


def run_child_and_kill(log_dir: str, rng: random.Random) -> int:
    """Fork a child that appends and flushes, SIGKILL it at a random moment; returns the highest
    offset it reported flushed. (Forked, not spawned: no interpreter start-up per kill.)"""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_fd)
            run(log_dir, BATCHES_PER_RUN, write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        first = pipe.readline()  # "started": the kill lands while appending
        assert first == b"started\n", first
        time.sleep(rng.uniform(0.0, 0.15))  # the random moment of the crash (not synchronization)
        os.kill(pid, signal.SIGKILL)
        output = pipe.read()
    os.waitpid(pid, 0)
    flushed = 0
    for line in output.split(b"\n")[:-1]:  # a torn last line is ignored
        if line.startswith(b"flushed "):
            flushed = max(flushed, int(line.split()[1]))
    return flushed


class Verified:
    """What earlier checks proved: a byte prefix of the log (by hash) and where it ends."""

    def __init__(self) -> None:
        self.size = 0
        self.digest = hashlib.sha256(b"").digest()
        self.offset = 0
        self.batch_number = 0


def check_log(log_dir: str, flushed: int, verified: Verified) -> int:
    manager = LogManager([log_dir], default_config=CONFIG)
    manager.startup()
    log = manager.get_log(TP)
    assert log is not None
    end = log.log_end_offset
    assert end >= flushed, f"flushed offset {flushed} lost: log ends at {end}"
    data = log.read(0, max_bytes=1 << 40, max_offset=end).read_bytes()
    for segment in log.segments:
        segment.close()
    # what was verified before is still there, unchanged (recovery only ever cuts a torn tail
    # beyond the flushed offset, and everything verified was below a later log end)
    assert hashlib.sha256(data[: verified.size]).digest() == verified.digest
    offset, n = verified.offset, verified.batch_number
    for found in iter_batches(memoryview(data)[verified.size :]):
        assert found.is_valid()
        assert found.header.base_offset == offset  # contiguous
        expected = bytearray(expected_batch(n))
        struct.pack_into(">q", expected, 0, offset)
        struct.pack_into(">i", expected, 12, 1)
        assert bytes(found.data) == bytes(expected), f"batch {n} at {offset} differs"
        offset += record_count(n)
        n += 1
    assert offset == end
    verified.size = len(data)
    verified.digest = hashlib.sha256(data).digest()
    verified.offset, verified.batch_number = offset, n
    return end


@pytest.mark.slow
def test_flushed_data_survives_sigkill_at_random_moments(tmp_path) -> None:
    rng = random.Random(20261121)
    log_dir = str(tmp_path / "logs")
    ends = []
    verified = Verified()
    for _ in range(KILLS):
        flushed = run_child_and_kill(log_dir, rng)
        ends.append(check_log(log_dir, flushed, verified))
    assert ends[-1] > 0
    assert len(set(ends)) > KILLS // 2  # the kills really landed at different moments
