"""Moving a replica between log dirs (AlterReplicaLogDirs): the copy, the swap, appends during
the move, truncation under it, and the crash-recovery rule of `LogManager.startup`."""

from __future__ import annotations

import time

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.rate import RateQuota
from moldau.storage import log_mover
from moldau.storage.config import LogConfig
from moldau.storage.log_loader import load_partition_log
from moldau.storage.log_manager import LogManager
from moldau.storage.log_mover import LogMove
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.storage.partition_log import PartitionLog
from moldau.types import TopicPartition

from .helpers import batch, values_from

TP = TopicPartition("moving", 0)
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200)


def manager(filesystem: MemoryFileSystem, clock: ManualClock) -> LogManager:
    logs = LogManager(["/d1", "/d2"], fs=filesystem, clock=clock)
    logs.startup()
    return logs


def fill(log: PartitionLog, count: int, prefix: bytes = b"v") -> None:
    for i in range(count):
        log.append_as_leader(batch(b"%s%04d" % (prefix, i) + b"." * 40), leader_epoch=3)


def segment_bytes(filesystem: MemoryFileSystem, log: PartitionLog) -> dict[int, bytes]:
    return {s.base_offset: filesystem.read_file(s.path(".log")) for s in log.segments}


def wait_moved(logs: LogManager, tp: TopicPartition = TP) -> None:
    deadline = time.monotonic() + 10
    while logs.moving(tp):
        assert time.monotonic() < deadline, "the move did not finish"
        time.sleep(0.005)


def test_a_moved_replica_has_the_same_bytes_offsets_and_epochs(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    logs = manager(filesystem, clock)
    log = logs.get_or_create_log(TP, CONFIG)
    source = logs.log_dir_of(TP)
    target = "/d2" if source == "/d1" else "/d1"
    fill(log, 120)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    assert len(log.segments) > 3
    before_bytes = segment_bytes(filesystem, log)
    before_values = values_from(log)
    epochs = list(log.leader_epoch_cache.entries)

    logs.alter_log_dir(TP, target + "/")
    wait_moved(logs)

    assert logs.log_dir_of(TP) == target
    assert log.directory == f"{target}/{TP}"
    assert not filesystem.exists(f"{source}/{TP}")
    assert segment_bytes(filesystem, log) == before_bytes
    assert values_from(log) == before_values
    assert log.leader_epoch_cache.entries == epochs
    fill(log, 10, b"after")  # appends go on in the new directory
    assert values_from(log)[-1][0] == 129
    logs.shutdown()

    again = manager(filesystem, clock)
    assert again.log_dir_of(TP) == target
    reopened = again.get_log(TP)
    assert reopened is not None
    assert values_from(reopened) == before_values + values_from(reopened)[120:]
    assert len(values_from(reopened)) == 130
    assert reopened.leader_epoch_cache.entries == epochs
    assert not [n for n in filesystem.listdir(source) if n.startswith(str(TP))]
    again.shutdown()


def log_of_60(
    filesystem: MemoryFileSystem,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    *,
    chunk_bytes: int,
) -> PartitionLog:
    """A log of 60 batches in /d1 (and an empty /d2), copied `chunk_bytes` at a time, the swap
    taking the last 64 bytes."""
    monkeypatch.setattr(log_mover, "COPY_CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(log_mover, "SWAP_TAIL_MAX_BYTES", 64)
    filesystem.makedirs("/d1")
    filesystem.makedirs("/d2")
    log = load_partition_log(filesystem, "/d1/moving-0", TP, CONFIG, clock=clock)
    fill(log, 60)
    return log


def test_appends_during_the_copy_are_all_in_the_moved_log_once(
    filesystem: MemoryFileSystem, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = log_of_60(filesystem, clock, monkeypatch, chunk_bytes=256)
    appended = [0]

    def append_meanwhile() -> bool:  # called between chunks, as the loop would append
        if appended[0] < 80:
            log.append_as_leader(batch(b"during%04d" % appended[0]), leader_epoch=4)
            appended[0] += 1
        return False

    move = LogMove(log, "/d2/moving-0.x-future", cancelled=append_meanwhile)
    move.copy()

    def commit() -> str:
        filesystem.rename("/d1/moving-0", "/d1/moving-0.x-delete")
        filesystem.rename("/d2/moving-0.x-future", "/d2/moving-0")
        return "/d2/moving-0"

    old_files = move.swap(commit)
    assert appended[0] > 20
    values = values_from(log)
    expected = [b"v%04d" % i for i in range(60)] + [b"during%04d" % i for i in range(appended[0])]
    assert [v.rstrip(b".") for _o, v in values] == expected
    assert [o for o, _v in values] == list(range(len(values)))
    # the moved files hold exactly what the old ones did
    for segment in log.segments:
        name = f"{segment.base_offset:020d}.log"
        assert filesystem.read_file(f"/d2/moving-0/{name}") == filesystem.read_file(
            f"/d1/moving-0.x-delete/{name}"
        )
    for file in old_files:
        file.close()
    log.append_as_leader(batch(b"last"), leader_epoch=4)
    log.close()
    reopened = load_partition_log(filesystem, "/d2/moving-0", TP, CONFIG, clock=clock)
    assert [v for _o, v in values_from(reopened)][-1] == b"last"
    assert len(values_from(reopened)) == len(values) + 1


def test_a_quota_holds_the_copy_to_its_rate_and_a_cancel_stops_the_wait(
    filesystem: MemoryFileSystem, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second: the copy's rounds wait (a sleep the
    test's clock makes instant) until the bytes copied are back under the rate."""
    log = log_of_60(filesystem, clock, monkeypatch, chunk_bytes=100)
    total = sum(segment.size for segment in log.segments)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(max(1, round(seconds * 1000)))

    limit = 1000  # bytes/s, over 2 windows of 1 s: a fresh quota lets 1000 through at once
    quota = RateQuota(lambda: limit, now=clock.monotonic, samples=2, window_s=1.0)
    LogMove(log, "/d2/moving-0.a-future", quota=quota, sleep=sleep).copy()
    assert max(slept) <= log_mover.QUOTA_WAIT_MAX_S
    # all but the first second's worth and the swap's tail went at the rate, not faster
    unthrottled = limit + log_mover.SWAP_TAIL_MAX_BYTES
    assert (total - unthrottled) / limit <= sum(slept) <= total / limit

    cancelled = [False]

    def cancel_while_waiting(seconds: float) -> None:
        cancelled[0] = True

    quota = RateQuota(lambda: limit, now=clock.monotonic, samples=2, window_s=1.0)
    move = LogMove(
        log,
        "/d2/moving-0.b-future",
        quota=quota,
        sleep=cancel_while_waiting,
        cancelled=lambda: cancelled[0],
    )
    with pytest.raises(log_mover.MoveCancelled):
        move.copy()
    log.close()


def test_a_truncation_under_the_copy_starts_it_over(
    filesystem: MemoryFileSystem, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_mover, "COPY_CHUNK_BYTES", 256)
    logs = manager(filesystem, clock)
    log = logs.get_or_create_log(TP, CONFIG)
    fill(log, 60)
    truncate = [True]
    original = LogMove._copy_segment

    def copy_segment(self: LogMove, item: object, *, throttled: bool) -> None:
        if truncate[0]:
            truncate[0] = False
            log.truncate_to(40)
            fill(log, 5, b"new")
        original(self, item, throttled=throttled)  # type: ignore[arg-type]

    monkeypatch.setattr(LogMove, "_copy_segment", copy_segment)
    source = logs.log_dir_of(TP)
    logs.alter_log_dir(TP, "/d2" if source == "/d1" else "/d1")
    wait_moved(logs)
    assert logs.log_dir_of(TP) != source
    values = [v.rstrip(b".") for _o, v in values_from(log)]
    assert values == [b"v%04d" % i for i in range(40)] + [b"new%04d" % i for i in range(5)]
    logs.shutdown()


def test_a_crash_before_the_commit_keeps_the_old_replica_and_removes_the_copy(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    logs = manager(filesystem, clock)
    log = logs.get_or_create_log(TP, CONFIG)
    source = logs.log_dir_of(TP)
    target = "/d2" if source == "/d1" else "/d1"
    fill(log, 50)
    log.flush()
    expected = values_from(log)
    LogMove(log, f"{target}/{TP}.abc-future").copy()
    filesystem.crash()

    again = manager(filesystem, clock)
    assert again.log_dir_of(TP) == source
    assert not filesystem.exists(f"{target}/{TP}.abc-future")
    reopened = again.get_log(TP)
    assert reopened is not None and values_from(reopened) == expected
    again.shutdown()


def test_a_crash_after_the_commit_completes_the_move(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    logs = manager(filesystem, clock)
    log = logs.get_or_create_log(TP, CONFIG)
    source = logs.log_dir_of(TP)
    target = "/d2" if source == "/d1" else "/d1"
    fill(log, 50)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    expected = values_from(log)
    move = LogMove(log, f"{target}/{TP}.abc-future")
    move.copy()

    def commit_then_crash() -> str:
        filesystem.rename(f"{source}/{TP}", f"{source}/{TP}.abc-delete")
        raise SystemExit("crash between the two renames")

    with pytest.raises(SystemExit):
        move.swap(commit_then_crash)
    filesystem.crash()

    again = manager(filesystem, clock)
    assert again.log_dir_of(TP) == target
    assert not filesystem.exists(f"{source}/{TP}.abc-delete")
    reopened = again.get_log(TP)
    assert reopened is not None and values_from(reopened) == expected
    again.shutdown()


def test_requests_the_manager_refuses_or_ignores(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    logs = manager(filesystem, clock)
    log = logs.get_or_create_log(TP, CONFIG)
    source = logs.log_dir_of(TP)
    assert source is not None
    for path, code in [
        ("/d3", ErrorCode.log_dir_not_found),
        ("d1", ErrorCode.log_dir_not_found),
        ("", ErrorCode.log_dir_not_found),
        ("/d1/../etc", ErrorCode.log_dir_not_found),
        ("/d1\0", ErrorCode.log_dir_not_found),
    ]:
        with pytest.raises(KafkaError) as refused:
            logs.alter_log_dir(TP, path)
        assert refused.value.code == code
    logs.alter_log_dir(TP, source)  # where it is: nothing to do
    assert not logs.moving(TP) and log.directory == f"{source}/{TP}"

    later = TopicPartition("later", 0)
    with pytest.raises(KafkaError) as refused:
        logs.alter_log_dir(later, source)
    assert refused.value.code == ErrorCode.replica_not_available
    logs.get_or_create_log(later, CONFIG)
    assert logs.log_dir_of(later) == source  # remembered, though the other dir has fewer
    logs.shutdown()
