"""A full or failing log directory: writes answer KAFKA_STORAGE_ERROR and nothing acknowledged is
lost, a full one keeps serving reads and comes back when a re-check finds space, a failed one is
taken offline, and start-up and shutdown never give up on the whole node for it."""

from __future__ import annotations

import errno

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.config import LogConfig
from moldau.storage.log_dir_failures import LogDirFailureChannel, LogDirState
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition

from .helpers import batch

TP = TopicPartition("events", 0)
CONFIG = LogConfig(segment_bytes=4096)


def start(filesystem: MemoryFileSystem, clock: ManualClock) -> LogManager:
    manager = LogManager(["/data"], fs=filesystem, clock=clock, default_config=CONFIG)
    manager.startup()
    return manager


def fill(filesystem: MemoryFileSystem) -> None:
    filesystem.capacity_bytes = filesystem.used_bytes()


def read_all(manager: LogManager, tp: TopicPartition = TP) -> bytes:
    log = manager.get_log(tp)
    assert log is not None
    return b"".join(r.read_bytes() for r in log.read(0, max_bytes=1 << 20).regions)


def test_errors_that_say_nothing_about_the_directory_change_no_state() -> None:
    channel = LogDirFailureChannel(["/a"])
    for code in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
        assert channel.report("/a", OSError(code, "x")) is LogDirState.ONLINE
    assert channel.report("/a", OSError(errno.ENOSPC, "full")) is LogDirState.FULL
    assert channel.report("/a", OSError(errno.EIO, "dying")) is LogDirState.FAILED
    assert channel.report("/a", OSError(errno.ENOSPC, "full")) is LogDirState.FAILED  # for good


def test_a_full_disk_refuses_appends_serves_reads_and_comes_back_after_a_recheck(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    manager = start(filesystem, clock)
    log = manager.get_or_create_log(TP)
    acknowledged = [log.append_as_leader(batch(b"before %d" % i), leader_epoch=0) for i in range(3)]
    log.flush()
    changes: list[tuple[str, LogDirState]] = []
    manager.failures.add_listener(lambda d, state, _error: changes.append((d, state)))
    fill(filesystem)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(batch(b"x" * 3000), leader_epoch=0)
    assert refused.value.code == ErrorCode.kafka_storage_error
    assert manager.failures.state("/data") is LogDirState.FULL
    assert changes == [("/data", LogDirState.FULL)]
    assert log.log_end_offset == 3
    assert read_all(manager).count(b"before") == 3  # reads are served
    assert manager.recheck_log_dirs() == []  # still full
    filesystem.capacity_bytes = None
    assert manager.recheck_log_dirs() == ["/data"]
    assert changes[-1] == ("/data", LogDirState.ONLINE)
    assert not filesystem.exists("/data/.moldau-write-check")
    after = log.append_as_leader(batch(b"after"), leader_epoch=0)
    assert after.first_offset == 3 == acknowledged[-1].last_offset + 1
    assert read_all(manager).count(b"before") == 3


def test_a_log_that_cannot_be_created_on_a_full_disk_is_created_once_space_returns(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    manager = start(filesystem, clock)
    filesystem.makedirs("/data")
    fill(filesystem)
    with pytest.raises(OSError):
        manager.get_or_create_log(TP, topic_id="0" * 32)
    assert manager.failures.state("/data") is LogDirState.FULL
    assert manager.get_log(TP) is None
    filesystem.capacity_bytes = None
    manager.recheck_log_dirs()
    log = manager.get_or_create_log(TP)
    assert log.append_as_leader(batch(b"v"), leader_epoch=0).first_offset == 0


def test_shutdown_on_a_full_disk_closes_everything_and_the_next_start_recovers(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    manager = start(filesystem, clock)
    log = manager.get_or_create_log(TP)
    for i in range(5):
        log.append_as_leader(batch(b"record %d" % i), leader_epoch=0)
    log.flush()  # acknowledged (acks=all)
    fill(filesystem)
    manager.shutdown()  # snapshot, checkpoints and the clean marker cannot be written
    assert log.closed
    assert not filesystem.exists(f"/data/{CLEAN_SHUTDOWN_FILE}")
    # a start on the still full disk opens the logs and serves reads
    manager = start(filesystem, clock)
    assert read_all(manager).count(b"record") == 5
    assert manager.get_log(TP).log_end_offset == 5  # type: ignore[union-attr]
    manager.shutdown()
    filesystem.capacity_bytes = None
    manager = start(filesystem, clock)
    assert read_all(manager).count(b"record") == 5
    manager.shutdown()
    assert filesystem.exists(f"/data/{CLEAN_SHUTDOWN_FILE}")


def test_a_partition_that_fails_to_open_at_start_is_retried_in_its_own_directory(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    manager = LogManager(["/a", "/b"], fs=filesystem, clock=clock, default_config=CONFIG)
    manager.startup()
    log = manager.get_or_create_log(TP)
    log.append_as_leader(batch(b"kept"), leader_epoch=0)
    home = manager.log_dir_of(TP)
    filesystem.crash()  # nothing flushed: the next start recovers, and recovery writes
    filesystem.failing = errno.EIO
    manager = LogManager(["/a", "/b"], fs=filesystem, clock=clock, default_config=CONFIG)
    manager.startup()
    assert manager.get_log(TP) is None
    assert set(manager.failures.offline_dirs()) == {"/a", "/b"}
    filesystem.failing = None
    assert manager.get_or_create_log(TP) is not None
    assert manager.log_dir_of(TP) == home


def test_a_failed_directory_is_taken_offline_and_its_logs_closed(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    manager = start(filesystem, clock)
    log = manager.get_or_create_log(TP)
    log.append_as_leader(batch(b"v"), leader_epoch=0)
    filesystem.failing = errno.EIO
    with pytest.raises(KafkaError):
        log.append_as_leader(batch(b"w"), leader_epoch=0)
    assert manager.failures.state("/data") is LogDirState.FAILED
    assert manager.take_offline("/data") == [TP]
    assert log.closed and manager.get_log(TP) is None
    assert manager.recheck_log_dirs() == []  # a failed directory needs a restart
    manager.shutdown()  # writes nothing to the failed directory, raises nothing


def test_a_log_whose_directory_failed_refuses_the_next_append_before_checking_its_sequence(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    """The broker takes a failed directory's partitions offline on its loop, after the failed
    append has been answered; a produce pipelined behind it on the same connection comes first.
    Checked against a producer state without the failed batch, it would get
    OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka bumps its epoch and sends again, as new
    records, a batch in the log whose answer was lost with the node (duplicates)."""
    manager = start(filesystem, clock)
    log = manager.get_or_create_log(TP)

    def idempotent(sequence: int, *values: bytes) -> bytes:
        return batch(*values, producer_id=7, producer_epoch=0, base_sequence=sequence)

    log.append_as_leader(idempotent(0, b"a", b"b", b"c"), leader_epoch=0)
    filesystem.failing = errno.EIO
    with pytest.raises(KafkaError) as failed:
        log.append_as_leader(idempotent(3, b"d"), leader_epoch=0)
    assert failed.value.code == ErrorCode.kafka_storage_error
    filesystem.failing = None  # (a write may well succeed: the directory has failed for good)
    with pytest.raises(KafkaError) as pipelined:
        log.append_as_leader(idempotent(4, b"e"), leader_epoch=0)
    assert pipelined.value.code == ErrorCode.kafka_storage_error
    assert log.log_end_offset == 3
    manager.shutdown()  # writes nothing to the failed directory, closes every file
    assert all(segment.closed for segment in log.segments)


def test_a_batch_pipelined_behind_one_a_full_disk_refused_is_refused_too_until_that_one_is_retried(
    filesystem: MemoryFileSystem, clock: ManualClock
) -> None:
    """A full directory stays open: space may come back between a refused batch and the one
    pipelined behind it. Checked against a producer state without the refused batch, the second
    would get OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka: an epoch bump and a resend as new
    records); it gets KAFKA_STORAGE_ERROR, and both are written once retried in order."""
    manager = start(filesystem, clock)
    log = manager.get_or_create_log(TP)

    def idempotent(sequence: int, *values: bytes, epoch: int = 0) -> bytes:
        return batch(*values, producer_id=7, producer_epoch=epoch, base_sequence=sequence)

    log.append_as_leader(idempotent(0, b"a", b"b", b"c"), leader_epoch=0)
    fill(filesystem)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(idempotent(3, b"d" * 3000), leader_epoch=0)
    assert refused.value.code == ErrorCode.kafka_storage_error
    filesystem.capacity_bytes = None
    with pytest.raises(KafkaError) as pipelined:
        log.append_as_leader(idempotent(4, b"e"), leader_epoch=0)
    assert pipelined.value.code == ErrorCode.kafka_storage_error
    with pytest.raises(KafkaError) as gap:  # not the batch right behind: a real gap
        log.append_as_leader(idempotent(3, b"x", epoch=1), leader_epoch=0)
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    assert log.append_as_leader(idempotent(3, b"d" * 3000), leader_epoch=0).first_offset == 3
    assert log.append_as_leader(idempotent(4, b"e"), leader_epoch=0).first_offset == 4
    with pytest.raises(KafkaError) as later:  # the refused batch is in: gaps are gaps again
        log.append_as_leader(idempotent(9, b"z"), leader_epoch=0)
    assert later.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 5
