"""The file-handle cache: a bound on open files, reopening by path, and never closing a
descriptor that a file region (a sendfile in flight) or a rename still needs."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import threading
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.storage.caching_filesystem import CachingFileSystem
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileHandle, OsFileSystem
from moldau.storage.log_manager import LogManager
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.types import TopicPartition

from .helpers import batch


def open_descriptors() -> int:
    gc.collect()  # caches of earlier tests (a cache and its handles refer to each other)
    return len(os.listdir("/proc/self/fd"))


def test_at_most_max_open_files_stay_open_and_evicted_files_reopen_by_path() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=3)
    handles = [cache.open(f"/d/{index}") for index in range(10)]
    for index, handle in enumerate(handles):
        handle.pwrite(b"file %d" % index, 0)
        assert cache.open_files <= 3
    for index, handle in enumerate(handles):
        assert handle.pread(100, 0) == b"file %d" % index
        assert handle.size() == len(b"file %d" % index)
    assert cache.open_files == 3 and cache.evictions >= 7 and cache.reopens >= 7


def test_files_used_since_the_last_sweep_are_closed_last() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=2)
    hot = cache.open("/d/hot")
    for index in range(20):
        hot.pwrite(b"x", index)
        cache.open(f"/d/cold-{index}")
    assert hot.is_open  # a use between sweeps is a second chance


def test_a_reopen_never_creates_a_file_that_is_gone() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=1)
    lost = cache.open("/d/lost")
    cache.open("/d/other")  # evicts `lost`
    memory.remove("/d/lost")  # behind the cache's back
    with pytest.raises(FileNotFoundError):
        lost.pread(1, 0)
    assert not memory.exists("/d/lost")


def test_renames_move_tracked_paths_and_keep_a_replaced_file_readable() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=1)
    old = cache.open("/d/segment.log")
    old.pwrite(b"old bytes", 0)
    new = cache.open("/d/segment.log.cleaned")  # evicts `old`
    new.pwrite(b"new", 0)
    # compaction's swap: the cleaned file is renamed over the old one's name
    cache.rename("/d/segment.log.cleaned", "/d/segment.log")
    assert old.detached and old.is_open
    assert old.pread(100, 0) == b"old bytes"  # still the old file
    cache.open("/d/third")  # evicts `new`
    assert new.pread(100, 0) == b"new" and new.path == "/d/segment.log"
    old.close()
    assert memory.read_file("/d/segment.log") == b"new"


def test_a_directory_rename_moves_its_files_and_a_removal_keeps_open_handles_readable() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d/topic-0")
    cache = CachingFileSystem(memory, max_open_files=1)
    log = cache.open("/d/topic-0/0.log")
    log.pwrite(b"records", 0)
    cache.open("/d/other")  # evicts `log`
    cache.rename("/d/topic-0", "/d/topic-0.abc-delete")
    assert log.path == "/d/topic-0.abc-delete/0.log"
    assert log.pread(100, 0) == b"records"
    cache.remove("/d/topic-0.abc-delete/0.log")
    assert log.pread(100, 0) == b"records"  # held open until closed
    log.close()
    with pytest.raises(OSError) as closed:
        log.pread(1, 0)
    assert closed.value.errno == errno.EBADF


def test_a_region_keeps_its_descriptor_while_the_cache_closes_its_file(tmp_path: Path) -> None:
    cache = CachingFileSystem(OsFileSystem(), max_open_files=2)
    segment = cache.open(str(tmp_path / "0.log"))
    segment.pwrite(b"A" * 4096, 0)
    region_file: FileHandle | None = segment.pinned()
    assert region_file is not None
    descriptor = region_file.fileno()
    inode = os.fstat(descriptor).st_ino
    others = [cache.open(str(tmp_path / f"{index}.other")) for index in range(50)]
    for other in others:
        other.pwrite(b"B" * 4096, 0)
    assert not segment.is_open  # the cache closed its file ...
    # ... but the descriptor the region holds is the segment's, not reused by another open
    assert os.fstat(descriptor).st_ino == inode
    assert os.pread(descriptor, 4096, 0) == b"A" * 4096
    region_file = None  # the region is sent and dropped: its descriptor closes
    # (another thread of this process may reuse the number at once: the segment's file is gone
    # from it either way; counting the process's descriptors would race with those threads)
    with contextlib.suppress(OSError):
        assert os.fstat(descriptor).st_ino != inode
    assert segment.pread(4, 0) == b"AAAA"  # reopened by path


def test_a_thousand_files_hold_no_more_descriptors_than_the_cache_allows(tmp_path: Path) -> None:
    cache = CachingFileSystem(OsFileSystem(), max_open_files=16)
    before = open_descriptors()
    handles = [cache.open(str(tmp_path / f"{index}.log")) for index in range(1000)]
    for index, handle in enumerate(handles):
        handle.pwrite(b"%d" % index, 0)
    assert open_descriptors() - before <= 16
    assert all(h.pread(10, 0) == b"%d" % i for i, h in enumerate(handles))
    for handle in handles:
        handle.close()
    assert open_descriptors() == before


class _OutOfDescriptorsOnce(MemoryFileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def open(self, path: str, *, create: bool = True):  # type: ignore[override]
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files", path)
        return super().open(path, create=create)


def test_running_out_of_descriptors_closes_part_of_the_cache_and_retries() -> None:
    memory = _OutOfDescriptorsOnce()
    memory.failures = 0
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=8)
    for index in range(8):
        cache.open(f"/d/{index}").pwrite(b"x", 0)
    for handle in list(cache._open):
        handle.used = False
    memory.failures = 1
    cache.open("/d/new")
    assert cache.open_files <= 7


def test_threads_reading_and_writing_through_a_tiny_cache_see_their_own_bytes() -> None:
    memory = MemoryFileSystem()
    memory.makedirs("/d")
    cache = CachingFileSystem(memory, max_open_files=2)
    handles = [cache.open(f"/d/{index}") for index in range(8)]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        handle = handles[index]
        try:
            for round_ in range(300):
                data = b"%d:%d;" % (index, round_)
                position = handle.size()
                handle.pwrite(data, position)
                assert handle.pread(len(data), position) == data
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cache.open_files <= 2


def test_a_log_manager_with_many_partitions_keeps_its_bound_across_a_restart(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = LogConfig(segment_bytes=200)
    before = open_descriptors()
    manager = LogManager([str(tmp_path)], clock=clock, default_config=config, max_open_files=12)
    manager.startup()
    partitions = [TopicPartition("wide", index) for index in range(60)]
    for tp in partitions:
        log = manager.get_or_create_log(tp)
        for round_ in range(3):  # rolls: several segments each
            log.append_as_leader(batch(b"%s-%d" % (str(tp).encode(), round_)), leader_epoch=0)
        log.flush()
    assert open_descriptors() - before <= 12
    manager.shutdown()
    assert open_descriptors() == before
    manager = LogManager([str(tmp_path)], clock=clock, default_config=config, max_open_files=12)
    manager.startup()
    assert open_descriptors() - before <= 12
    for tp in partitions:
        log = manager.get_log(tp)
        assert log is not None and log.log_end_offset == 3
        data = b"".join(r.read_bytes() for r in log.read(0, max_bytes=1 << 20).regions)
        assert data.count(str(tp).encode()) == 3
    manager.shutdown()
    assert open_descriptors() == before
