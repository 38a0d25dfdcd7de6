"""An in-memory `FileSystem` that can crash: lose what was not fsynced, or tear it part way.

Each file keeps its current bytes and the bytes of its last fsync. `crash()` replaces every file by
its durable bytes (plus, with `tear=True`, a random prefix of the unsynced tail: a torn write) and
invalidates every open handle, as if the process died. Directory operations (create, rename,
remove) are durable at once, as on a journaling file system after the directory is fsynced.

Disk faults: `capacity_bytes` makes a write that would grow the files past it fail with ENOSPC,
writing nothing (a full disk); `failing = errno.EIO` makes every operation fail (a dying disk).
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import random
import threading
from collections.abc import Sequence

from moldau.storage.filesystem import Buffer

__all__ = ["MemoryFile", "MemoryFileSystem"]


class _Node:
    __slots__ = ("data", "durable")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""


class MemoryFile:
    """A handle on an in-memory file; stale after a crash."""

    __slots__ = ("_closed", "_filesystem", "_generation", "_node", "path")

    def __init__(self, filesystem: MemoryFileSystem, path: str, node: _Node) -> None:
        self._filesystem = filesystem
        self._node = node
        self._generation = filesystem.generation
        self._closed = False
        self.path = path

    def _check(self) -> _Node:
        if self._closed or self._generation != self._filesystem.generation:
            raise OSError(9, "bad file descriptor", self.path)
        self._filesystem._check_failing(self.path)
        return self._node

    def fileno(self) -> int:
        raise io.UnsupportedOperation("in-memory file has no descriptor")

    def pinned(self) -> MemoryFile:
        return self

    def pread(self, size: int, position: int) -> bytes:
        node = self._check()
        return bytes(node.data[position : position + size])

    def pwritev(self, buffers: Sequence[Buffer], position: int, size: int = -1) -> int:
        node = self._check()
        data = b"".join(bytes(b) for b in buffers)
        with self._filesystem.lock:
            self._filesystem._grow(self.path, len(node.data), position + len(data))
            if position > len(node.data):
                node.data.extend(bytes(position - len(node.data)))
            node.data[position : position + len(data)] = data
        return len(data)

    def pwrite(self, data: Buffer, position: int) -> int:
        return self.pwritev([data], position)

    def size(self) -> int:
        return len(self._check().data)

    def truncate(self, size: int) -> None:
        node = self._check()
        with self._filesystem.lock:  # growing makes a sparse file: it takes no space here
            if size < len(node.data):
                del node.data[size:]
            else:
                node.data.extend(bytes(size - len(node.data)))

    def fsync(self) -> None:
        node = self._check()
        with self._filesystem.lock:
            node.durable = bytes(node.data)
        self._filesystem.fsync_count += 1

    def close(self) -> None:
        self._closed = True


class MemoryFileSystem:
    """Files and directories in dictionaries; see the module docstring for crash semantics."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.generation = 0
        self.fsync_count = 0
        self.capacity_bytes: int | None = None
        self.failing: int | None = None  # an errno every operation fails with
        self._files: dict[str, _Node] = {}
        self._directories: set[str] = {"/"}

    def _parent(self, path: str) -> str:
        return posixpath.dirname(path.rstrip("/")) or "/"

    def _check_failing(self, path: str) -> None:
        if self.failing is not None:
            raise OSError(self.failing, os.strerror(self.failing), path)

    def used_bytes(self) -> int:
        with self.lock:
            return sum(len(node.data) for node in self._files.values())

    def _grow(self, path: str, old_size: int, new_size: int) -> None:
        """Under `lock`: refuse (ENOSPC) a file growing from `old_size` past the capacity."""
        capacity = self.capacity_bytes
        growth = new_size - old_size
        if capacity is not None and growth > 0 and self.used_bytes() + growth > capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    def open(self, path: str, *, create: bool = True) -> MemoryFile:
        self._check_failing(path)
        with self.lock:
            node = self._files.get(path)
            if node is None:
                if not create or self._parent(path) not in self._directories:
                    raise FileNotFoundError(path)
                node = self._files[path] = _Node()
            return MemoryFile(self, path, node)

    def exists(self, path: str) -> bool:
        return path in self._files or path.rstrip("/") in self._directories

    def isdir(self, path: str) -> bool:
        return path.rstrip("/") in self._directories

    def listdir(self, path: str) -> list[str]:
        self._check_failing(path)
        path = path.rstrip("/") or "/"
        with self.lock:
            if path not in self._directories:
                raise FileNotFoundError(path)
            names = {posixpath.basename(p) for p in self._files if self._parent(p) == path}
            names |= {
                posixpath.basename(d)
                for d in self._directories
                if d != path and self._parent(d) == path
            }
        return sorted(names)

    def makedirs(self, path: str) -> None:
        path = path.rstrip("/") or "/"
        with self.lock:
            while path not in self._directories:
                self._directories.add(path)
                path = self._parent(path)

    def rename(self, source: str, target: str) -> None:
        with self.lock:
            if source in self._files:
                self._files[target] = self._files.pop(source)
                return
            source = source.rstrip("/")
            if source not in self._directories:
                raise FileNotFoundError(source)
            prefix = source + "/"
            self._directories = {
                target + d[len(source) :] if d == source or d.startswith(prefix) else d
                for d in self._directories
            }
            self._files = {
                (target + p[len(source) :] if p.startswith(prefix) else p): n
                for p, n in self._files.items()
            }

    def remove(self, path: str) -> None:
        with self.lock:
            self._files.pop(path, None)

    def remove_tree(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        with self.lock:
            self._files = {p: n for p, n in self._files.items() if not p.startswith(prefix)}
            self._directories = {
                d for d in self._directories if d != path.rstrip("/") and not d.startswith(prefix)
            }

    def read_file(self, path: str) -> bytes:
        self._check_failing(path)
        with self.lock:
            node = self._files.get(path)
            if node is None:
                raise FileNotFoundError(path)
            return bytes(node.data)

    def write_file_atomic(self, path: str, data: bytes) -> None:
        self._check_failing(path)
        with self.lock:
            if self._parent(path) not in self._directories:
                raise FileNotFoundError(path)
            self._grow(path + ".tmp", 0, len(data))
            node = _Node()
            node.data = bytearray(data)
            node.durable = bytes(data)
            self._files[path] = node

    # -- fault injection --

    def crash(self, *, tear: bool = False, rng: random.Random | None = None) -> None:
        """Forget every unsynced byte (or keep a random prefix of it with `tear`); close handles."""
        rng = rng or random.Random()
        with self.lock:
            self.generation += 1
            for node in self._files.values():
                durable = node.durable
                extends = node.data[: len(durable)] == durable and len(node.data) > len(durable)
                if tear and extends:
                    keep = rng.randint(0, len(node.data) - len(durable))
                    node.data = bytearray(node.data[: len(durable) + keep])
                else:
                    node.data = bytearray(durable)
                node.durable = bytes(node.data)

    def corrupt(self, path: str, position: int) -> None:
        """Flip one byte of a file (bit rot), durably."""
        with self.lock:
            node = self._files[path]
            node.data[position] ^= 0xFF
            node.durable = bytes(node.data)
