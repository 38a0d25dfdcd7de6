"""All partition logs of a node, Kafka's `LogManager`: open and recover them at startup, create
and delete them, and drive flushes, retention, checkpoints and the cleaner.

    <log.dir>/<topic>-<partition>/            one PartitionLog
    <log.dir>/recovery-point-offset-checkpoint, log-start-offset-checkpoint,
              replication-offset-checkpoint, cleaner-offset-checkpoint
    <log.dir>/.kafka_cleanshutdown            present only after a clean shutdown
    <log.dir>/<topic>-<partition>.<id>-delete  a deleted (or moved) partition waiting for removal
    <log.dir>/<topic>-<partition>.<id>-future  a replica being moved here (`log_mover.py`)

I/O errors are reported to `failures` (`log_dir_failures.py`) by the log dir they happened in:
start-up opens what it can and leaves a partition that fails to open for `get_or_create_log`
to retry, checkpoints skip a directory that cannot be written, and shutdown closes every log it
can and writes the clean-shutdown marker only where everything was flushed and closed.
"""

from __future__ import annotations

import functools
import json
import logging
import posixpath
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.rate import RateQuota
from moldau.storage.caching_filesystem import CachingFileSystem
from moldau.storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    topic_id_text,
    write_offset_checkpoint,
    write_partition_metadata,
)
from moldau.storage.cleaner import LogCleaner
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem, OsFileSystem
from moldau.storage.log_dir_failures import LogDirFailureChannel, LogDirState
from moldau.storage.log_dir_moves import DELETE_DIRECTORY_SUFFIX, FutureReplica, LogDirMoves
from moldau.storage.log_loader import (
    PARTITION_METADATA,
    load_partition_log,
    parse_partition_directory,
)
from moldau.storage.log_mover import FUTURE_DIRECTORY_SUFFIX
from moldau.storage.log_registry import LogRegistry
from moldau.storage.log_retention import delete_expired_segments, delete_old_segments
from moldau.storage.partition_log import PartitionLog
from moldau.types import TopicPartition

__all__ = ["CLEAN_SHUTDOWN_FILE", "FutureReplica", "LogManager"]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms: one day

# The KRaft metadata log may share a log dir; Kafka's LogManager skips it too.
METADATA_TOPIC = "__cluster_metadata"


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str],
        *,
        fs: FileSystem | None = None,
        clock: Clock = SYSTEM_CLOCK,
        default_config: LogConfig | None = None,
        recovery_threads: int = 4,
        max_open_files: int | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        move_quota: RateQuota | None = None,
    ) -> None:
        """`max_open_files`: keep at most that many segment files open (`CachingFileSystem`).
        `producer_id_expiration_ms`: idle producers are forgotten after it (a log opened drops
        those already expired, as Kafka's snapshot load does; `remove_expired_producers` the
        rest). `move_quota`: the byte rate replica moves between log dirs copy at, at most."""
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [d.rstrip("/") or "/" for d in log_dirs]
        filesystem: FileSystem = fs if fs is not None else OsFileSystem()
        if max_open_files is not None:
            filesystem = CachingFileSystem(filesystem, max_open_files)
        self.filesystem = filesystem
        self.clock = clock
        self.default_config = default_config or LogConfig()
        self.recovery_threads = recovery_threads
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.registry = LogRegistry()
        self.failures = LogDirFailureChannel(self.log_dirs)
        self._checkpoint_lock = threading.Lock()
        self._checkpointed: dict[str, dict[TopicPartition, int]] = {}
        self.cleaner = LogCleaner(
            self.logs, checkpoint=self.checkpoint_cleaner_offsets, clock=clock
        )
        self.moves = LogDirMoves(
            log_dirs=self.log_dirs,
            filesystem=filesystem,
            clock=clock,
            failures=self.failures,
            cleaner=self.cleaner,
            registry=self.registry,
            checkpoint_all=self.checkpoint_all,
            move_quota=move_quota,
        )
        self.started = False

    # -- lifecycle --

    def startup(self) -> None:
        """Open every partition under every log dir, recovering after an unclean shutdown."""
        jobs = []
        futures: list[tuple[TopicPartition, str, str]] = []
        all_listed = True
        for log_dir in self.log_dirs:
            try:
                self.filesystem.makedirs(log_dir)
                marker = posixpath.join(log_dir, CLEAN_SHUTDOWN_FILE)
                clean = self.filesystem.exists(marker)
                names = self.filesystem.listdir(log_dir)
            except OSError as error:
                self.failures.report(log_dir, error)
                all_listed = False
                continue
            recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            cleaned = self._read_checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT)
            for name in names:
                path = posixpath.join(log_dir, name)
                if not self.filesystem.isdir(path):
                    continue
                if name.endswith(DELETE_DIRECTORY_SUFFIX):
                    self.filesystem.remove_tree(path)
                    continue
                if name.endswith(FUTURE_DIRECTORY_SUFFIX):
                    moved = parse_partition_directory(name.rpartition(".")[0])
                    if moved is not None:
                        futures.append((moved, log_dir, path))
                    continue
                tp = parse_partition_directory(name)
                if tp is None or tp.topic == METADATA_TOPIC:
                    continue  # the metadata log (Raft) is not a partition of this manager
                jobs.append(
                    (
                        tp,
                        log_dir,
                        path,
                        clean,
                        recovery_points.get(tp, 0),
                        start_offsets.get(tp, 0),
                        high_watermarks.get(tp, 0),
                        cleaned.get(tp, 0),
                    )
                )
        live = {job[0] for job in jobs}
        for tp, log_dir, path in self.moves.recover(futures, live, all_listed=all_listed):
            points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            marks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            jobs.append(
                (tp, log_dir, path, False, points.get(tp, 0), starts.get(tp, 0),
                 marks.get(tp, 0), 0)
            )  # fmt: skip

        def open_one(job: tuple[TopicPartition, str, str, bool, int, int, int, int]) -> None:
            tp, log_dir, path, clean, recovery_point, start, high_watermark, first_dirty = job
            try:
                log = load_partition_log(
                    self.filesystem,
                    path,
                    tp,
                    self.default_config,
                    clock=self.clock,
                    recovery_point=recovery_point,
                    log_start_offset=start,
                    high_watermark=high_watermark,
                    clean_shutdown=clean,
                )
            except OSError as error:
                self.failures.report(log_dir, error)
                logger.error("cannot open the log of %s in %s: %s", tp, log_dir, error)
                with self.registry.lock:
                    self.registry.unopened[tp] = log_dir
                return
            log.first_dirty_offset = min(max(first_dirty, log.log_start_offset), log.log_end_offset)
            with self.registry.lock:
                self._register(tp, log, log_dir)

        if len(jobs) > 1 and self.recovery_threads > 1:
            with ThreadPoolExecutor(max_workers=self.recovery_threads) as pool:
                list(pool.map(open_one, jobs))
        else:
            for job in jobs:
                open_one(job)
        for log_dir in self.log_dirs:
            try:
                self.filesystem.remove(posixpath.join(log_dir, CLEAN_SHUTDOWN_FILE))
            except OSError as error:
                self.failures.report(log_dir, error)
        self.checkpoint_all()
        self.started = True

    def _register(self, tp: TopicPartition, partition_log: PartitionLog, log_dir: str) -> None:
        """Under the registry's lock: a log of this manager, reporting its I/O errors for
        `log_dir`."""
        partition_log.io_error_handler = functools.partial(self.failures.report, log_dir)
        partition_log.remove_expired_producers(self.clock.now_ms(), self.producer_id_expiration_ms)
        registry = self.registry
        registry.logs[tp] = partition_log
        registry.log_dir_of[tp] = log_dir
        registry.unopened.pop(tp, None)

    def shutdown(self) -> None:
        """Stop moves and the cleaner, flush and close every log, write checkpoints and the clean
        marker."""
        self.moves.stop()
        self.stop_cleaner()
        with self.registry.lock:
            logs = list(self.registry.logs.items())
        unclean = set(self.failures.offline_dirs())
        failed: dict[str, list[TopicPartition]] = {}

        def close(item: tuple[TopicPartition, PartitionLog]) -> None:
            tp, partition_log = item
            try:
                partition_log.close()
            except OSError:  # reported by the log; recovery finishes the job
                with self.registry.lock:
                    failed.setdefault(self.registry.log_dir_of.get(tp, ""), []).append(tp)

        # Closing is mostly fsyncs: threads overlap them (Kafka closes logs in parallel too).
        if len(logs) > 1 and self.recovery_threads > 1:
            with ThreadPoolExecutor(max_workers=self.recovery_threads) as pool:
                list(pool.map(close, logs))
        else:
            for item in logs:
                close(item)
        for log_dir, partitions in failed.items():
            unclean.add(log_dir)
            logger.warning(
                "%d logs in %s could not be flushed and closed cleanly (%s): the next start "
                "recovers them",
                len(partitions),
                log_dir,
                self.failures.error(log_dir) or "I/O error",
            )
        self.checkpoint_all()
        self._remove_retired_directories()
        for log_dir in self.log_dirs:
            if log_dir in unclean or self.failures.state(log_dir) is not LogDirState.ONLINE:
                continue  # recovered at the next start
            marker = json.dumps({"version": 0, "brokerEpoch": -1}).encode("utf-8")
            try:
                self.filesystem.write_file_atomic(
                    posixpath.join(log_dir, CLEAN_SHUTDOWN_FILE), marker
                )
            except OSError as error:
                self.failures.report(log_dir, error)
        self.started = False

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- logs --

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self.registry.logs.get(tp)

    def logs(self) -> list[PartitionLog]:
        with self.registry.lock:
            return list(self.registry.logs.values())

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self.registry.log_dir_of.get(tp)

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        *,
        topic_id: object = None,
    ) -> PartitionLog:
        """The log of `tp`, created empty in the least loaded log dir if missing; an existing
        log takes `config`."""
        config = config or self.default_config
        registry = self.registry
        with registry.lock:
            log = registry.logs.get(tp)
            if log is not None:
                if log.config != config:
                    log.update_config(config)
                if topic_id is not None and log.topic_id is None:
                    self._write_topic_id(log, topic_id)
                return log
            log_dir = registry.unopened.get(tp) or self.moves.take_preferred_dir(tp)
            if log_dir is None or self.failures.state(log_dir) is not LogDirState.ONLINE:
                log_dir = registry.unopened.get(tp) or self._least_loaded_dir()
            path = posixpath.join(log_dir, str(tp))
            try:
                log = load_partition_log(self.filesystem, path, tp, config, clock=self.clock)
                if topic_id is not None:
                    self._write_topic_id(log, topic_id)
            except OSError as error:
                self.failures.report(log_dir, error)
                raise
            self._register(tp, log, log_dir)
            return log

    def _least_loaded_dir(self) -> str:
        """Where a new log goes: the directory with the fewest, failed ones last (as Kafka)."""
        counts = dict.fromkeys(self.log_dirs, 0)
        for log_dir in self.registry.log_dir_of.values():
            counts[log_dir] += 1
        return min(
            self.log_dirs,
            key=lambda d: (self.failures.state(d) is LogDirState.FAILED, counts[d]),
        )

    def _write_topic_id(self, log: PartitionLog, topic_id: object) -> None:
        write_partition_metadata(
            self.filesystem, posixpath.join(log.directory, PARTITION_METADATA), topic_id
        )
        log.topic_id = topic_id_text(topic_id)

    def delete_log(self, tp: TopicPartition, *, checkpoint: bool = True) -> bool:
        """Remove a partition: its directory is renamed `<tp>.<id>-delete` at once and removed
        after `file.delete.delay.ms` (in-flight reads of it complete). `checkpoint=False` leaves
        the checkpoint files to the caller (one rewrite after many deletions)."""
        registry = self.registry
        with registry.lock:
            log = registry.logs.pop(tp, None)
            log_dir = registry.log_dir_of.pop(tp, None)
            registry.unopened.pop(tp, None)
        if log is None or log_dir is None:
            return False
        with log.lock:
            log.closed = True
            directory = log.directory  # (where a move left it)
        target = posixpath.join(
            posixpath.dirname(directory), f"{tp}.{uuid.uuid4().hex}{DELETE_DIRECTORY_SUFFIX}"
        )
        self.filesystem.rename(directory, target)
        due = self.clock.now_ms() + log.config.file_delete_delay_ms
        registry.retire_directory(due, functools.partial(self._close_deleted_log, log), target)
        if checkpoint:
            self.checkpoint_all()
        return True

    def take_offline(self, log_dir: str) -> list[TopicPartition]:
        """Forget and close (quietly) the logs of a FAILED directory; returns their partitions.
        They answer KAFKA_STORAGE_ERROR from the broker until the node restarts (Kafka)."""
        registry = self.registry
        with registry.lock:
            gone = [tp for tp, d in registry.log_dir_of.items() if d == log_dir]
            logs = [registry.logs.pop(tp) for tp in gone]
            for tp in gone:
                del registry.log_dir_of[tp]
        for partition_log in logs:
            partition_log.close_quietly()
        return gone

    @staticmethod
    def _close_deleted_log(log: PartitionLog) -> None:
        for segment in log.segments:
            segment.close()
        delete_expired_segments(log, force=True)

    # -- moving replicas between log dirs (`log_dir_moves.py`) --

    def alter_log_dir(self, tp: TopicPartition, path: str) -> None:
        """AlterReplicaLogDirs: see `LogDirMoves.alter_log_dir`."""
        self.moves.alter_log_dir(tp, path)

    def future_replicas(self) -> list[FutureReplica]:
        return self.moves.future_replicas()

    def moving(self, tp: TopicPartition) -> bool:
        return self.moves.moving(tp)

    # -- background work --

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log; returns segments deleted."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        deleted = 0
        for partition_log in self.logs():
            try:
                deleted += delete_old_segments(partition_log, now)
                delete_expired_segments(partition_log, now)
            except OSError as error:
                self._report(partition_log, error)
        self._remove_retired_directories(now)
        self.checkpoint_all()
        return deleted

    def _remove_retired_directories(self, now: int | None = None) -> None:
        """Remove the directories of deleted and moved partitions due by `now` (all without)."""
        for _due, close_files, path in self.registry.take_retired_directories(now):
            try:
                close_files()
                self.filesystem.remove_tree(path)
            except OSError as error:
                logger.warning("removing %s failed: %s", path, error)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """One pass of Kafka's producer expiration check over every log, leaders and followers
        alike (each applies the same rule to the same batch timestamps); returns how many
        producer ids were forgotten."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        return sum(
            partition_log.remove_expired_producers(now, self.producer_id_expiration_ms)
            for partition_log in self.logs()
        )

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Flush logs due by `flush.ms` or `flush.messages`; returns how many were flushed."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        flushed = 0
        for partition_log in self.logs():
            config, local = partition_log.config, partition_log.local
            if local.unflushed_messages and (
                now - local.last_flush_ms >= config.flush_ms
                or local.unflushed_messages >= config.flush_messages
            ):
                try:
                    partition_log.flush()
                except OSError:
                    continue  # reported by the log
                flushed += 1
        self.checkpoint_all()
        return flushed

    def _report(self, partition_log: PartitionLog, error: OSError) -> None:
        log_dir = self.registry.log_dir_of.get(partition_log.topic_partition)
        if log_dir is not None:
            self.failures.report(log_dir, error)

    def recheck_log_dirs(self) -> list[str]:
        """Probe the full log dirs; returns those that have room again (see LogDirFailureChannel)."""
        return self.failures.recheck(self.filesystem)

    def start_cleaner(self) -> None:
        self.cleaner.start()

    def stop_cleaner(self) -> None:
        self.cleaner.stop()

    # -- checkpoints --

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.filesystem, posixpath.join(log_dir, name))
        except (CheckpointError, ValueError):
            return {}
        except OSError as error:
            self.failures.report(log_dir, error)
            return {}

    def _write_checkpoint(self, name: str, value_of: str, *, compacted_only: bool = False) -> None:
        with self._checkpoint_lock:
            for log_dir in self.log_dirs:
                if self.failures.state(log_dir) is LogDirState.FAILED:
                    continue
                # A move at its swap is written in its target too: a crash right after the
                # commit finds the checkpoints there (harmless if the move does not commit).
                log_dir_of, committing = self.registry.log_dir_of, self.moves.committing
                offsets = {
                    tp: int(getattr(log, value_of))
                    for tp, log in list(self.registry.logs.items())
                    if log_dir in (log_dir_of.get(tp), committing.get(tp))
                    and (log.config.compact or not compacted_only)
                }
                path = posixpath.join(log_dir, name)
                if self._checkpointed.get(path) != offsets:  # unchanged files are not rewritten
                    try:
                        write_offset_checkpoint(self.filesystem, path, offsets)
                    except OSError as error:
                        self.failures.report(log_dir, error)
                        continue
                    self._checkpointed[path] = offsets

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, "recovery_point")

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, "log_start_offset")

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, "high_watermark")

    def checkpoint_cleaner_offsets(self) -> None:
        self._write_checkpoint(CLEANER_OFFSET_CHECKPOINT, "first_dirty_offset", compacted_only=True)

    def checkpoint_all(self) -> None:
        """Write every checkpoint file whose content changed (Kafka writes recovery points every
        `log.flush.offset.checkpoint.interval.ms` and high watermarks every
        `replica.high.watermark.checkpoint.interval.ms`; callers choose the cadence)."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()
