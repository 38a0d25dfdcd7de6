"""The file system the log is written through: `FileSystem` (role) and `OsFileSystem` (real disk).

Storage never calls `open`/`os.*` directly, so the same log code runs over `MemoryFileSystem`
(`memory_filesystem.py`), which can lose unsynced writes and tear the last one, in unit tests.
Files are positional: writers say where (`pwritev`), readers say where (`pread`); there is no
shared file pointer, so readers and one writer can use a handle concurrently.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Protocol

__all__ = ["Buffer", "FileHandle", "FileSystem", "OsFile", "OsFileSystem"]

Buffer = bytes | bytearray | memoryview
_IOV_MAX = 1024


class FileHandle(Protocol):
    """An open file, read and written at explicit positions."""

    def fileno(self) -> int:
        """The OS descriptor (for sendfile); raises `io.UnsupportedOperation` when there is none."""
        ...

    def pinned(self) -> FileHandle:
        """A handle on the same file that stays open for as long as the caller keeps it (a
        `FileRegion` keeps one while its bytes are sent), even if this one is closed by a
        handle cache meanwhile. Plain handles return themselves."""
        ...

    def pread(self, size: int, position: int) -> bytes: ...

    def pwritev(self, buffers: Sequence[Buffer], position: int, size: int = -1) -> int:
        """Write all of `buffers` at `position` (`size`, if known, is their total length)."""
        ...

    def pwrite(self, data: Buffer, position: int) -> int:
        """Write all of `data` at `position`."""
        ...

    def size(self) -> int: ...

    def truncate(self, size: int) -> None: ...

    def fsync(self) -> None: ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    """Paths are plain strings; `rename` replaces its target atomically."""

    def open(self, path: str, *, create: bool = True) -> FileHandle:
        """Open for reading and writing, creating the file if missing (FileNotFoundError
        instead when `create` is False)."""
        ...

    def exists(self, path: str) -> bool: ...

    def isdir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_tree(self, path: str) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file_atomic(self, path: str, data: bytes) -> None:
        """Write to `path.tmp`, fsync, rename over `path`: readers see the old or the new file."""
        ...


_OPEN_FLAGS = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)


class OsFile:
    """A descriptor opened with `os.open`; all I/O is positional (`os.pread`, `os.pwritev`).

    The descriptor is closed by `close()` or, like a Python file object's, when the last
    reference to the handle goes: a handle cache that drops a handle while a file region still
    holds it leaves the descriptor open until the region is sent (see `caching_filesystem.py`).
    """

    __slots__ = ("_fd", "path")

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.path = path
        self._fd = -1
        self._fd = os.open(path, (_OPEN_FLAGS | os.O_CREAT) if create else _OPEN_FLAGS, 0o644)

    def __del__(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)

    def fileno(self) -> int:
        return self._fd

    def pinned(self) -> OsFile:
        return self

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self._fd, size, position)

    def pwritev(self, buffers: Sequence[Buffer], position: int, size: int = -1) -> int:
        if len(buffers) == 1:
            written = os.pwrite(self._fd, buffers[0], position)
        else:
            if len(buffers) > _IOV_MAX:
                buffers = [b"".join(buffers)]
            written = os.pwritev(self._fd, buffers, position)
        if size < 0:
            size = sum(len(b) for b in buffers)
        if written != size:  # short writes are rare (disk full); finish them byte-exactly
            data = b"".join(bytes(b) for b in buffers)
            while written < size:
                written += os.pwrite(self._fd, data[written:], position + written)
        return written

    def pwrite(self, data: Buffer, position: int) -> int:
        written = os.pwrite(self._fd, data, position)
        if written != len(data):
            written += self.pwritev([memoryview(data)[written:]], position + written)
        return written

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def fsync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class OsFileSystem:
    """The real disk."""

    def open(self, path: str, *, create: bool = True) -> OsFile:
        return OsFile(path, create=create)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)
        _fsync_directory(os.path.dirname(target) or ".")

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    def write_file_atomic(self, path: str, data: bytes) -> None:
        temporary = path + ".tmp"
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        self.rename(temporary, path)


def _fsync_directory(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
