"""The health of each log directory, Kafka's `LogDirFailureChannel` (KIP-112): storage code that
hits an I/O error reports it here, and the broker acts on the change.

    ONLINE --ENOSPC, EDQUOT--> FULL --a re-check writes and fsyncs a probe file--> ONLINE
    ONLINE, FULL --any other I/O error (EIO, EROFS, ...)--> FAILED  (until the node restarts)

A FULL directory is Moldau's addition: Kafka takes a directory offline on any I/O error, reads
included. Here a full disk still serves reads (consumers drain it) and every write is still
tried, so each gets its own answer (KAFKA_STORAGE_ERROR while no space is left); the state is
what DescribeLogDirs reports and what the periodic re-check clears. A FAILED directory is Kafka's
offline directory: its partitions answer KAFKA_STORAGE_ERROR to reads and writes until a restart.
Errors that say nothing about the directory (EMFILE, ENFILE, ENOMEM, EINTR, EAGAIN) fail the one
operation and change no state. Listeners are called on the thread that reported the error.
"""

from __future__ import annotations

import errno
import logging
import posixpath
import threading
from collections.abc import Callable, Sequence
from enum import Enum

from moldau.storage.filesystem import FileSystem

__all__ = ["PROBE_FILE", "LogDirFailureChannel", "LogDirState"]

log = logging.getLogger(__name__)

PROBE_FILE = ".moldau-write-check"
PROBE_BYTES = 64 * 1024
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_NOT_THE_DIRECTORY = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR, errno.EAGAIN}
)


class LogDirState(Enum):
    ONLINE = "online"
    FULL = "full"
    FAILED = "failed"


Listener = Callable[[str, LogDirState, OSError | None], None]


class LogDirFailureChannel:
    """Thread-safe; every storage thread (appends, flushes, retention, the cleaner) reports."""

    def __init__(self, log_dirs: Sequence[str]) -> None:
        self._states = dict.fromkeys(log_dirs, LogDirState.ONLINE)
        self._errors: dict[str, OSError] = {}
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def state(self, log_dir: str) -> LogDirState:
        return self._states.get(log_dir, LogDirState.ONLINE)

    def error(self, log_dir: str) -> OSError | None:
        """The error that took `log_dir` out of ONLINE, if it is."""
        return self._errors.get(log_dir)

    def offline_dirs(self) -> list[str]:
        return [d for d, state in self._states.items() if state is not LogDirState.ONLINE]

    def report(self, log_dir: str, error: OSError) -> LogDirState:
        """An I/O error in `log_dir`; returns the directory's state after it."""
        if error.errno in _NOT_THE_DIRECTORY:
            return self.state(log_dir)
        new = LogDirState.FULL if error.errno in _FULL else LogDirState.FAILED
        with self._lock:
            old = self._states.get(log_dir, LogDirState.ONLINE)
            if old is LogDirState.FAILED or old is new:
                return old
            self._states[log_dir] = new
            self._errors[log_dir] = error
        if new is LogDirState.FULL:
            log.error("log dir %s is full (%s): writes fail until space returns", log_dir, error)
        else:
            log.error(
                "log dir %s failed (%s): its partitions are offline until restart", log_dir, error
            )
        self._notify(log_dir, new, error)
        return new

    def recheck(self, filesystem: FileSystem) -> list[str]:
        """Probe every FULL directory (write and fsync PROBE_BYTES, then remove them); those that
        take them are ONLINE again. Returns them."""
        recovered = []
        for log_dir in [d for d, s in list(self._states.items()) if s is LogDirState.FULL]:
            path = posixpath.join(log_dir, PROBE_FILE)
            try:
                filesystem.write_file_atomic(path, bytes(PROBE_BYTES))
                filesystem.remove(path)
            except OSError:
                try:
                    filesystem.remove(path)
                    filesystem.remove(path + ".tmp")
                except OSError:
                    pass
                continue
            with self._lock:
                if self._states.get(log_dir) is not LogDirState.FULL:
                    continue
                self._states[log_dir] = LogDirState.ONLINE
                self._errors.pop(log_dir, None)
            log.warning("log dir %s has space again: back online", log_dir)
            self._notify(log_dir, LogDirState.ONLINE, None)
            recovered.append(log_dir)
        return recovered

    def _notify(self, log_dir: str, state: LogDirState, error: OSError | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(log_dir, state, error)
            except Exception:
                log.exception("a log dir listener failed")
