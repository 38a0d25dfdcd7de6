"""A `FileSystem` that keeps at most `max_open_files` files open, so a node's descriptors do not
grow with its partitions: a segment has four files, and 20,000 idle partitions would otherwise
hold 80,000 descriptors. (Kafka keeps every segment's `.log` open and maps its indexes.)

A `CachedFile` is a handle whose OS file may be closed by the cache (least recently used first,
by second chance: a use only sets a bit, so the append and read paths take no lock) and is
reopened by path, never created, on its next use. What keeps that safe:

- A handle never loses its file. Renames through this file system move a tracked path along;
  before a rename replaces a tracked file, or a removal unlinks one, its file is reopened and the
  handle *detached*: kept open, outside the cache, until its owner closes it (a deleted segment
  waiting for `file.delete.delay.ms`, the old files of a compacted segment). Renames and removals
  hold the cache lock, so no reopen sees a path in the middle of a move.
- The cache closes a file by dropping its reference to the inner handle; the descriptor is
  closed when the last reference goes (`OsFile`). A `FileRegion` holds the inner handle
  (`pinned()`), so a `sendfile` in flight keeps its descriptor, and so does a worker thread in
  the middle of an fsync: no descriptor is closed, or its number reused, under a reader.
- Opening when descriptors run out (EMFILE, ENFILE: sockets share the limit) closes a quarter of
  the cache and tries once more.
"""

from __future__ import annotations

import errno
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Sequence

from moldau.storage.filesystem import Buffer, FileHandle, FileSystem

__all__ = ["CachedFile", "CachingFileSystem"]

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class CachedFile:
    """A file handle whose descriptor the cache may close between uses (see the module)."""

    __slots__ = ("_cache", "_file", "closed", "detached", "path", "used")

    def __init__(self, cache: CachingFileSystem, path: str, file: FileHandle) -> None:
        self._cache = cache
        self._file: FileHandle | None = file
        self.path = path
        self.used = False  # second chance: set by every use, cleared by the eviction sweep
        self.detached = False  # kept open outside the cache (its path no longer names it)
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open" if self._file is not None else "evicted"
        return f"CachedFile({self.path!r}, {state})"

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def _current(self) -> FileHandle:
        file = self._file
        if file is None:
            file = self._cache._reopen(self)
        self.used = True
        return file

    def pinned(self) -> FileHandle:
        return self._current()

    def fileno(self) -> int:
        """The descriptor open now; only `pinned()` keeps one valid across later uses."""
        return self._current().fileno()

    # pread, pwritev and pwrite are the append and read paths: `_current()` inlined (a call
    # fewer per record batch).

    def pread(self, size: int, position: int) -> bytes:
        file = self._file
        if file is None:
            file = self._cache._reopen(self)
        self.used = True
        return file.pread(size, position)

    def pwritev(self, buffers: Sequence[Buffer], position: int, size: int = -1) -> int:
        file = self._file
        if file is None:
            file = self._cache._reopen(self)
        self.used = True
        return file.pwritev(buffers, position, size)

    def pwrite(self, data: Buffer, position: int) -> int:
        file = self._file
        if file is None:
            file = self._cache._reopen(self)
        self.used = True
        return file.pwrite(data, position)

    def size(self) -> int:
        return self._current().size()

    def truncate(self, size: int) -> None:
        self._current().truncate(size)

    def fsync(self) -> None:
        self._current().fsync()

    def close(self) -> None:
        self._cache._close(self)


class CachingFileSystem:
    """Wraps another `FileSystem`; `open` returns `CachedFile`s, at most `max_open_files` of
    them open at once (detached ones, see the module docstring, are counted apart)."""

    def __init__(self, inner: FileSystem, max_open_files: int) -> None:
        if max_open_files < 1:
            raise ValueError("max_open_files must be at least 1")
        self.inner = inner
        self.max_open_files = max_open_files
        self._lock = threading.RLock()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()  # evictable, open
        self._tracked: dict[str, dict[str, CachedFile]] = {}  # directory -> name -> handle
        self.evictions = 0
        self.reopens = 0

    @property
    def open_files(self) -> int:
        """Files the cache holds open now (detached ones not counted)."""
        return len(self._open)

    # -- handles --

    def open(self, path: str, *, create: bool = True) -> CachedFile:
        with self._lock:
            inner = self._open_inner(path, create=create)
            previous = self._untrack(path)
            if previous is not None:
                self._detach(previous)  # two handles on one path: the older keeps its file
            handle = CachedFile(self, path, inner)
            self._track(handle)
            self._open[handle] = None
            return handle

    def _reopen(self, handle: CachedFile) -> FileHandle:
        with self._lock:
            file = handle._file
            if file is not None:
                return file
            if handle.closed:
                raise OSError(errno.EBADF, "file handle is closed", handle.path)
            if handle.detached:  # its file was gone before it could be held open
                raise OSError(errno.ENOENT, "file handle lost its file", handle.path)
            file = handle._file = self._open_inner(handle.path, create=False)
            self._open[handle] = None
            self.reopens += 1
            return file

    def _open_inner(self, path: str, *, create: bool) -> FileHandle:
        """Open under the lock, making room first (and once more if descriptors run out)."""
        while len(self._open) >= self.max_open_files:
            self._evict_one()
        try:
            return self.inner.open(path, create=create)
        except OSError as error:
            if error.errno not in _OUT_OF_DESCRIPTORS or not self._open:
                raise
            for _ in range(max(1, len(self._open) // 4)):
                self._evict_one()
            return self.inner.open(path, create=create)

    def _evict_one(self) -> None:
        """Close the least recently used open file that was not used since the last sweep."""
        while self._open:
            handle = next(iter(self._open))
            if handle.used:
                handle.used = False
                self._open.move_to_end(handle)
                continue
            del self._open[handle]
            handle._file = None  # its descriptor closes with the last reference to it
            self.evictions += 1
            return

    def _close(self, handle: CachedFile) -> None:
        with self._lock:
            if handle.closed:
                return
            handle.closed = True
            self._open.pop(handle, None)
            if not handle.detached:
                self._untrack(handle.path, handle)
            handle._file = None

    def _detach(self, handle: CachedFile) -> None:
        """Keep `handle` open for good: its path is about to stop naming its file."""
        if handle.closed or handle.detached:
            return
        self._open.pop(handle, None)
        handle.detached = True
        if handle._file is None:
            try:
                handle._file = self.inner.open(handle.path, create=False)
            except FileNotFoundError:
                return  # already gone: later uses fail instead of opening another file
            self.reopens += 1

    # -- path bookkeeping --

    def _track(self, handle: CachedFile) -> None:
        directory, name = posixpath.split(handle.path)
        self._tracked.setdefault(directory, {})[name] = handle

    def _untrack(self, path: str, handle: CachedFile | None = None) -> CachedFile | None:
        """Forget the handle tracked at `path` (only if it is `handle`, when given)."""
        directory, name = posixpath.split(path)
        names = self._tracked.get(directory)
        if names is None:
            return None
        found = names.get(name)
        if found is None or (handle is not None and found is not handle):
            return None
        del names[name]
        if not names:
            del self._tracked[directory]
        return found

    # -- directory operations --

    def rename(self, source: str, target: str) -> None:
        with self._lock:
            replaced = self._untrack(target)
            if replaced is not None:
                self._detach(replaced)
            self.inner.rename(source, target)
            moved = self._untrack(source)
            if moved is not None:
                moved.path = target
                self._track(moved)
            names = self._tracked.pop(source.rstrip("/"), None)
            if names is not None:  # a directory: its files move with it
                directory = target.rstrip("/")
                for name, handle in names.items():
                    handle.path = posixpath.join(directory, name)
                self._tracked[directory] = names

    def remove(self, path: str) -> None:
        with self._lock:
            removed = self._untrack(path)
            if removed is not None:
                self._detach(removed)
            self.inner.remove(path)

    def remove_tree(self, path: str) -> None:
        with self._lock:
            for handle in list(self._tracked.pop(path.rstrip("/"), {}).values()):
                self._detach(handle)
            self.inner.remove_tree(path)

    def write_file_atomic(self, path: str, data: bytes) -> None:
        with self._lock:
            replaced = self._untrack(path)
            if replaced is not None:
                self._detach(replaced)
        self.inner.write_file_atomic(path, data)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def isdir(self, path: str) -> bool:
        return self.inner.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def read_file(self, path: str) -> bytes:
        return self.inner.read_file(path)
