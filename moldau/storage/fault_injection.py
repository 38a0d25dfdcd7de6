"""Disk faults injected into a running node, for the chaos suite (tests/chaos): a `FileSystem`
that fails chosen operations with a chosen errno while a control file says so.

The node uses it only when started with `MOLDAU_STORAGE_FAULTS=<control file>` in its
environment (it logs a warning then); otherwise storage runs on `OsFileSystem` untouched. The
control file is read again at most every `RECHECK_S`; each line is

    <operation> <errno name> [<path prefix>]

with `<operation>` one of `fsync` (a file's fsync, and the one inside `write_file_atomic`),
`write` (positional writes, truncation, `write_file_atomic`) or `read` (positional reads), for
example `fsync EIO`. A missing or empty file injects nothing. A line that cannot be parsed is
logged and skipped, so a fault is never silently something else.

Simulation tests use `MemoryFileSystem`'s `failing` instead (the same errors, no file).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.storage.filesystem import Buffer, FileHandle, FileSystem

__all__ = ["ENVIRONMENT_VARIABLE", "FaultInjectingFileSystem", "from_environment"]

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "MOLDAU_STORAGE_FAULTS"
OPERATIONS = ("fsync", "write", "read")
RECHECK_S = 0.05


@dataclass(frozen=True, slots=True)
class Fault:
    operation: str
    errno: int
    prefix: str = ""  # only paths starting with it ("" is every path)


def parse(text: str) -> list[Fault]:
    """The faults a control file's text names; unparsable lines are logged and skipped."""
    faults = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        code = getattr(errno, words[1], None) if len(words) >= 2 else None
        if words[0] not in OPERATIONS or not isinstance(code, int) or len(words) > 3:
            wanted = f"<{'|'.join(OPERATIONS)}> <ERRNO> [prefix]"
            log.warning("storage fault line %d ignored (want %s): %r", number, wanted, line)
            continue
        faults.append(Fault(words[0], code, words[2] if len(words) == 3 else ""))
    return faults


class _Control:
    """The control file's faults, read again at most every `recheck_s`."""

    def __init__(self, path: str, recheck_s: float) -> None:
        self.path = path
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._checked = 0.0
        self._faults: list[Fault] = []

    def fault(self, operation: str, path: str) -> Fault | None:
        now = time.monotonic()
        if now - self._checked >= self.recheck_s:
            self._refresh(now)
        for fault in self._faults:
            if fault.operation == operation and path.startswith(fault.prefix):
                return fault
        return None

    def _refresh(self, now: float) -> None:
        with self._lock:
            self._checked = now
            try:
                with open(self.path, encoding="utf-8") as file:
                    text = file.read()
            except FileNotFoundError:
                text = ""
            faults = parse(text)
            if faults != self._faults:
                named = [f"{f.operation} {errno.errorcode[f.errno]} {f.prefix}" for f in faults]
                log.warning("storage faults now injected: %s", ", ".join(named) or "none")
            self._faults = faults


class _FaultyFile:
    """A handle whose operations fail while the control file names them for its path."""

    __slots__ = ("_control", "_inner", "path")

    def __init__(self, inner: FileHandle, path: str, control: _Control) -> None:
        self._inner = inner
        self.path = path
        self._control = control

    def _check(self, operation: str) -> None:
        fault = self._control.fault(operation, self.path)
        if fault is not None:
            raise OSError(fault.errno, f"{os.strerror(fault.errno)} (injected)", self.path)

    def fileno(self) -> int:
        return self._inner.fileno()

    def pinned(self) -> FileHandle:
        return _FaultyFile(self._inner.pinned(), self.path, self._control)

    def pread(self, size: int, position: int) -> bytes:
        self._check("read")
        return self._inner.pread(size, position)

    def pwritev(self, buffers: Sequence[Buffer], position: int, size: int = -1) -> int:
        self._check("write")
        return self._inner.pwritev(buffers, position, size)

    def pwrite(self, data: Buffer, position: int) -> int:
        self._check("write")
        return self._inner.pwrite(data, position)

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, size: int) -> None:
        self._check("write")
        self._inner.truncate(size)

    def fsync(self) -> None:
        self._check("fsync")
        self._inner.fsync()

    def close(self) -> None:
        self._inner.close()


class FaultInjectingFileSystem:
    """`inner`, with the operations the control file at `control_path` names failing (the file
    is looked at again at most every `recheck_s`)."""

    def __init__(self, inner: FileSystem, control_path: str, recheck_s: float = RECHECK_S) -> None:
        self._inner = inner
        self._control = _Control(control_path, recheck_s)

    def _check(self, operation: str, path: str) -> None:
        fault = self._control.fault(operation, path)
        if fault is not None:
            raise OSError(fault.errno, f"{os.strerror(fault.errno)} (injected)", path)

    def open(self, path: str, *, create: bool = True) -> FileHandle:
        return _FaultyFile(self._inner.open(path, create=create), path, self._control)

    def exists(self, path: str) -> bool:
        return self._inner.exists(path)

    def isdir(self, path: str) -> bool:
        return self._inner.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return self._inner.listdir(path)

    def makedirs(self, path: str) -> None:
        self._inner.makedirs(path)

    def rename(self, source: str, target: str) -> None:
        self._inner.rename(source, target)

    def remove(self, path: str) -> None:
        self._inner.remove(path)

    def remove_tree(self, path: str) -> None:
        self._inner.remove_tree(path)

    def read_file(self, path: str) -> bytes:
        self._check("read", path)
        return self._inner.read_file(path)

    def write_file_atomic(self, path: str, data: bytes) -> None:
        self._check("write", path)
        self._check("fsync", path)
        self._inner.write_file_atomic(path, data)


def from_environment(inner: FileSystem) -> FileSystem:
    """`inner` wrapped when `MOLDAU_STORAGE_FAULTS` names a control file, else `inner`."""
    control = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if not control:
        return inner
    log.warning(
        "%s=%s: storage operations fail as that file says (fault injection for tests)",
        ENVIRONMENT_VARIABLE,
        control,
    )
    return FaultInjectingFileSystem(inner, control)
