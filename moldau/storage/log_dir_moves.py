"""Moving replicas between the log dirs of a node (AlterReplicaLogDirs, KIP-113), part of
Kafka's `LogManager` and `ReplicaManager.alterReplicaLogDirs`: requests, the preferred dir of a
replica not created yet, one mover thread running moves in order, the commit (two renames) and
the crash-recovery rule at start-up. The copy and the swap are `log_mover.py`'s. A
`LogManager` owns one `LogDirMoves`, which works on the manager's `LogRegistry`.

The move is local to this broker: Moldau's metadata has no directory ids (KIP-858's
AssignReplicasToDirs), so the controller is not told where a replica lives.
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.rate import RateQuota
from moldau.storage.cleaner import LogCleaner
from moldau.storage.filesystem import FileHandle, FileSystem
from moldau.storage.log_dir_failures import LogDirFailureChannel, LogDirState
from moldau.storage.log_mover import (
    FUTURE_DIRECTORY_SUFFIX,
    LogMove,
    MoveCancelled,
    MoveRestart,
)
from moldau.storage.log_registry import LogRegistry
from moldau.storage.partition_log import PartitionLog
from moldau.types import TopicPartition

__all__ = ["DELETE_DIRECTORY_SUFFIX", "FutureReplica", "LogDirMoves"]

logger = logging.getLogger(__name__)

DELETE_DIRECTORY_SUFFIX = "-delete"

# A move that meets a truncation under its copy starts over this many times, then gives up.
MOVE_ATTEMPTS = 3
# Preferred log dirs kept for replicas not created yet (AlterReplicaLogDirs ahead of them).
MAX_PREFERRED_DIRS = 10_000


@dataclass(slots=True)
class _ReplicaMove:
    """A move of one replica to `target`, queued or running (one at a time, in order)."""

    target: str
    move_id: str
    cancelled: bool = False
    progress: LogMove | None = None


@dataclass(frozen=True, slots=True)
class FutureReplica:
    """A replica being moved, as DescribeLogDirs shows it (IsFutureKey)."""

    topic_partition: TopicPartition
    log_dir: str
    size_bytes: int
    offset_lag: int


class LogDirMoves:
    """The moves of one `LogManager`: they work on its `registry` (the logs and their dirs) and
    call `checkpoint_all` to write its checkpoint files; compaction of a moving partition is
    paused on `cleaner`."""

    def __init__(
        self,
        *,
        log_dirs: Sequence[str],
        filesystem: FileSystem,
        clock: Clock,
        failures: LogDirFailureChannel,
        cleaner: LogCleaner,
        registry: LogRegistry,
        checkpoint_all: Callable[[], None],
        move_quota: RateQuota | None = None,
    ) -> None:
        """`move_quota`: replica.alter.log.dirs.io.max.bytes.per.second, the byte rate all
        moves together copy at, at most (None: no limit)."""
        self.log_dirs = log_dirs
        self.filesystem = filesystem
        self.clock = clock
        self.failures = failures
        self.cleaner = cleaner
        self.registry = registry
        self.checkpoint_all = checkpoint_all
        self.move_quota = move_quota
        # under the registry's lock, as the logs the moves work on
        self._moves: dict[TopicPartition, _ReplicaMove] = {}
        self.committing: dict[TopicPartition, str] = {}  # moves at their swap -> target dir
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._move_executor: ThreadPoolExecutor | None = None

    def resolve_log_dir(self, path: str) -> str | None:
        """The log dir `path` names (absolute, as DescribeLogDirs reports it), or None."""
        if not path.startswith("/") or "\0" in path:
            return None
        wanted = posixpath.normpath(path)
        for log_dir in self.log_dirs:
            absolute = log_dir if log_dir.startswith("/") else os.path.abspath(log_dir)
            if posixpath.normpath(absolute) == wanted:
                return log_dir
        return None

    def alter_log_dir(self, tp: TopicPartition, path: str) -> None:
        """Move the replica of `tp` to the log dir `path`, in the background; a move already
        under way elsewhere is cancelled for it (Kafka's `alterReplicaLogDirs`). Raises
        KafkaError: LOG_DIR_NOT_FOUND (not one of `log.dirs`), KAFKA_STORAGE_ERROR (the target
        or the replica's dir is not online, or a log dir failed), REPLICA_NOT_AVAILABLE (no
        replica here yet: it will be created in `path`)."""
        log_dir = self.resolve_log_dir(path)
        if log_dir is None:
            raise KafkaError(ErrorCode.log_dir_not_found, f"{path} is not a log dir of this broker")
        if self.failures.state(log_dir) is not LogDirState.ONLINE:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log dir {log_dir} is not online")
        with self.registry.lock:
            log = self.registry.logs.get(tp)
            if log is None:
                if tp in self.registry.unopened:
                    raise KafkaError(ErrorCode.kafka_storage_error, f"{tp} is offline")
                self._preferred_dirs.pop(tp, None)
                if len(self._preferred_dirs) >= MAX_PREFERRED_DIRS:
                    del self._preferred_dirs[next(iter(self._preferred_dirs))]
                self._preferred_dirs[tp] = log_dir
                raise KafkaError(ErrorCode.replica_not_available, f"no replica of {tp} here yet")
            move = self._moves.get(tp)
            if move is not None and move.target == log_dir:
                return
            if move is None and self.registry.log_dir_of[tp] == log_dir:
                return  # where it is already
            # As Kafka: no future replica while a dir is offline (it could hold another one).
            if self.failures.offline_dirs():
                raise KafkaError(ErrorCode.kafka_storage_error, "a log dir is offline")
            if move is not None:
                move.cancelled = True  # the new move runs after it stops (or commits)
            move = _ReplicaMove(target=log_dir, move_id=uuid.uuid4().hex)
            self._moves[tp] = move
            if self._move_executor is None:
                self._move_executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="log-dir-mover"
                )
            self._move_executor.submit(self._run_move, tp, move)

    def future_replicas(self) -> list[FutureReplica]:
        """The replicas being moved and how far their copies are."""
        with self.registry.lock:
            moves = [(tp, move) for tp, move in self._moves.items() if move.progress is not None]
        found = []
        for tp, move in moves:
            progress, log = move.progress, self.registry.logs.get(tp)
            if progress is None or log is None:
                continue
            lag = max(log.log_end_offset - progress.copied_offset, 0)
            found.append(FutureReplica(tp, move.target, progress.copied_bytes, lag))
        return found

    def moving(self, tp: TopicPartition) -> bool:
        return tp in self._moves

    def _run_move(self, tp: TopicPartition, move: _ReplicaMove) -> None:
        try:
            self._move(tp, move)
        except Exception:
            logger.exception("moving %s to %s failed; it stays where it is", tp, move.target)
        finally:
            with self.registry.lock:
                if self._moves.get(tp) is move:
                    del self._moves[tp]

    def _move(self, tp: TopicPartition, move: _ReplicaMove) -> None:
        with self.registry.lock:
            log, source = self.registry.logs.get(tp), self.registry.log_dir_of.get(tp)
        if log is None or source is None or move.cancelled or source == move.target:
            return
        future = posixpath.join(move.target, f"{tp}.{move.move_id}{FUTURE_DIRECTORY_SUFFIX}")
        self.cleaner.pause(tp)
        try:
            for attempt in range(MOVE_ATTEMPTS):
                progress = LogMove(
                    log, future, cancelled=lambda: move.cancelled, quota=self.move_quota
                )
                move.progress = progress
                try:
                    progress.copy()
                    self.committing[tp] = move.target
                    self.checkpoint_all()
                    old_files = progress.swap(
                        functools.partial(self._commit_move, tp, log, move, future)
                    )
                except MoveRestart:
                    logger.info("%s was truncated while it moved: copying again", tp)
                    self.filesystem.remove_tree(future)
                    continue
                except BaseException:
                    self.filesystem.remove_tree(future)
                    raise
                finally:
                    self.committing.pop(tp, None)
                self._retire(log, old_files, source, move)
                logger.info("moved %s from %s to %s (attempt %d)", tp, source, move.target, attempt)
                return
            logger.error("gave up moving %s: truncated under every copy", tp)
        except MoveCancelled:
            logger.info("the move of %s to %s was cancelled", tp, move.target)
        finally:
            self.cleaner.resume(tp)

    def _commit_move(
        self, tp: TopicPartition, log: PartitionLog, move: _ReplicaMove, future: str
    ) -> str:
        """Under the log's locks, its copy complete and fsynced: rename the old directory away
        (the commit point), then the future one into place. Returns the new directory."""
        old = log.directory
        retired = f"{old}.{move.move_id}{DELETE_DIRECTORY_SUFFIX}"
        target = posixpath.join(move.target, str(tp))
        self.filesystem.rename(old, retired)
        try:
            self.filesystem.rename(future, target)
        except OSError:
            self.filesystem.rename(retired, old)  # not committed after all
            raise
        # (no manager lock here: its order is manager, then log)
        if self.registry.logs.get(tp) is log:
            self.registry.log_dir_of[tp] = move.target
            log.io_error_handler = functools.partial(self.failures.report, move.target)
        return target

    def _retire(
        self, log: PartitionLog, old_files: list[FileHandle], source: str, move: _ReplicaMove
    ) -> None:
        """The old directory (renamed `-delete`) goes after the delete delay, as a deleted
        partition's does: reads in flight finish from its files."""
        retired = posixpath.join(
            source, f"{log.topic_partition}.{move.move_id}{DELETE_DIRECTORY_SUFFIX}"
        )

        def close_files() -> None:
            for file in old_files:
                file.close()

        due = self.clock.now_ms() + log.config.file_delete_delay_ms
        self.registry.retire_directory(due, close_files, retired)
        self.checkpoint_all()

    def stop(self) -> None:
        """Cancel every move and wait for the mover thread to end."""
        with self.registry.lock:
            for move in self._moves.values():
                move.cancelled = True
            executor, self._move_executor = self._move_executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def take_preferred_dir(self, tp: TopicPartition) -> str | None:
        """Under the registry's lock: the log dir asked for `tp` before it had a replica here."""
        return self._preferred_dirs.pop(tp, None)

    def recover(
        self,
        futures: list[tuple[TopicPartition, str, str]],
        live: set[TopicPartition],
        *,
        all_listed: bool,
    ) -> list[tuple[TopicPartition, str, str]]:
        """The crash-recovery rule of a move (`log_mover.py`) for the `(partition, log dir,
        path)` of each future replica found at start-up: one of a partition live elsewhere is
        removed (its move had not committed); one whose partition is nowhere else is renamed
        into place (the old directory had been renamed away: it had committed). With a log dir
        that could not be listed nothing is decided. Returns the `(partition, log dir, path)`
        of the logs to open, whose offsets are in their log dir's checkpoints (the move wrote
        them before committing)."""
        completed = []
        for tp, log_dir, path in futures:
            if not all_listed:
                logger.warning("leaving %s: a log dir could not be listed", path)
            elif tp in live:
                logger.info("removing %s: the move of %s had not completed", path, tp)
                self.filesystem.remove_tree(path)
            else:
                target = posixpath.join(log_dir, str(tp))
                logger.warning("completing the move of %s to %s", tp, log_dir)
                self.filesystem.rename(path, target)
                live.add(tp)
                completed.append((tp, log_dir, target))
        return completed
