"""The storage fault seam the chaos suite drives (`MOLDAU_STORAGE_FAULTS`)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from moldau.storage import fault_injection
from moldau.storage.fault_injection import Fault, FaultInjectingFileSystem, parse
from moldau.storage.filesystem import OsFileSystem


def test_parse_reads_operation_errno_and_prefix_and_skips_what_it_cannot_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "fsync EIO\n# a comment\n\nwrite ENOSPC /data/a\nflush EIO\nread ENOTANERRNO\n"
    assert parse(text) == [
        Fault("fsync", errno.EIO),
        Fault("write", errno.ENOSPC, "/data/a"),
    ]
    assert "line 5 ignored" in caplog.text and "line 6 ignored" in caplog.text


def test_operations_fail_while_the_control_file_names_them(tmp_path: Path) -> None:
    control = tmp_path / "faults"
    filesystem = FaultInjectingFileSystem(OsFileSystem(), str(control), recheck_s=0)
    data = tmp_path / "data"
    data.mkdir()
    handle = filesystem.open(str(data / "segment.log"))
    handle.pwrite(b"abc", 0)
    handle.fsync()

    control.write_text(f"fsync EIO {data}\n")
    with pytest.raises(OSError) as failed:
        handle.fsync()
    assert failed.value.errno == errno.EIO and "injected" in str(failed.value)
    with pytest.raises(OSError):
        filesystem.write_file_atomic(str(data / "checkpoint"), b"1")
    handle.pwrite(b"d", 3)  # writes are not named: they go on
    assert handle.pread(4, 0) == b"abcd"
    elsewhere = filesystem.open(str(tmp_path / "other.log"))
    elsewhere.fsync()  # outside the prefix

    control.write_text("write EROFS\n")
    handle.fsync()
    with pytest.raises(OSError) as refused:
        handle.pwritev([b"e"], 4)
    assert refused.value.errno == errno.EROFS
    with pytest.raises(OSError):
        handle.truncate(0)

    control.unlink()
    handle.pwritev([b"e"], 4)
    handle.fsync()
    assert handle.pread(5, 0) == b"abcde"


def test_without_the_variable_the_file_system_is_the_one_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = OsFileSystem()
    monkeypatch.delenv(fault_injection.ENVIRONMENT_VARIABLE, raising=False)
    assert fault_injection.from_environment(inner) is inner
    monkeypatch.setenv(fault_injection.ENVIRONMENT_VARIABLE, "/nonexistent/faults")
    assert isinstance(fault_injection.from_environment(inner), FaultInjectingFileSystem)
