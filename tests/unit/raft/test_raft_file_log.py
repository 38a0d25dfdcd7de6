import os

import pytest

from moldau.raft.file_log import LOG_FILE_NAME, FileReplicatedLog, encode_entry
from moldau.raft.log import LogEntry, MemoryReplicatedLog


def entry(base_offset, *records, epoch=1, control=False):
    return LogEntry(
        base_offset=base_offset, epoch=epoch, records=tuple(records), is_control=control
    )


@pytest.fixture(params=["file", "memory"])
def make_log(request, tmp_path):
    if request.param == "file":
        return lambda: FileReplicatedLog(str(tmp_path / "__cluster_metadata-0"))
    memory = MemoryReplicatedLog()
    return lambda: memory


def test_appended_entries_read_back_in_order_from_any_offset(make_log):
    log = make_log()
    log.append(entry(0, b"leader", control=True))
    log.append(entry(1, b"a", b"b"))
    log.append(entry(3, b"c", epoch=2))
    assert log.end_offset == 4 and log.last_epoch == 2
    assert [e.base_offset for e in log.read(0)] == [0, 1, 3]
    assert [e.base_offset for e in log.read(2)] == [1, 3]  # offset 2 is inside the entry at 1
    assert [e.records for e in log.read(3)] == [(b"c",)]
    assert list(log.read(4)) == []
    assert log.flush() == 4 and log.flushed_offset == 4


def test_entries_must_continue_the_log(make_log):
    log = make_log()
    log.append(entry(0, b"a"))
    with pytest.raises(ValueError):
        log.append(entry(5, b"b"))
    with pytest.raises(ValueError):
        log.append(entry(1))


def test_truncate_to_drops_whole_entries_at_and_after_the_offset(make_log):
    log = make_log()
    for offset in range(4):
        log.append(entry(offset, b"%d" % offset))
    log.flush()
    log.truncate_to(2)
    assert [e.base_offset for e in log.read()] == [0, 1]
    assert log.end_offset == 2 and log.flushed_offset == 2
    log.append(entry(2, b"new"))
    assert [e.records for e in log.read(2)] == [(b"new",)]


def test_a_reopened_file_log_has_every_flushed_entry(tmp_path):
    directory = str(tmp_path / "m")
    log = FileReplicatedLog(directory)
    log.append(entry(0, b"leader", control=True))
    log.append(entry(1, b"x" * 10_000, b""))
    log.flush()
    log.close()
    reopened = FileReplicatedLog(directory)
    assert list(reopened.read()) == [
        entry(0, b"leader", control=True),
        entry(1, b"x" * 10_000, b""),
    ]
    assert (
        reopened.end_offset == 3 and reopened.flushed_offset == 3 and reopened.truncated_bytes == 0
    )


@pytest.mark.parametrize(
    "damage", ["cut_in_length", "cut_in_body", "flipped_byte", "garbage_appended"]
)
def test_recovery_truncates_a_torn_tail(tmp_path, damage):
    directory = str(tmp_path / "m")
    log = FileReplicatedLog(directory)
    log.append(entry(0, b"first"))
    log.append(entry(1, b"second"))
    log.flush()
    log.close()
    path = os.path.join(directory, LOG_FILE_NAME)
    whole_first = len(encode_entry(entry(0, b"first")))
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    if damage == "cut_in_length":
        data = data[: whole_first + 2]
    elif damage == "cut_in_body":
        data = data[:-3]
    elif damage == "flipped_byte":
        data[-1] ^= 0xFF
    else:
        data += b"\x00\x00\x00\x30" + b"\x07" * 20
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    recovered = FileReplicatedLog(directory)
    expected = (
        [entry(0, b"first")]
        if damage != "garbage_appended"
        else [entry(0, b"first"), entry(1, b"second")]
    )
    assert list(recovered.read()) == expected
    assert recovered.truncated_bytes > 0
    assert os.path.getsize(path) == sum(len(encode_entry(e)) for e in expected)
    # The log continues cleanly after the cut.
    recovered.append(entry(recovered.end_offset, b"after"))
    recovered.flush()
    recovered.close()
    assert [e.records for e in FileReplicatedLog(directory).read()][-1] == (b"after",)


def test_an_entry_that_does_not_continue_the_offsets_ends_recovery(tmp_path):
    directory = str(tmp_path / "m")
    os.makedirs(directory)
    with open(os.path.join(directory, LOG_FILE_NAME), "wb") as handle:
        handle.write(encode_entry(entry(0, b"a")) + encode_entry(entry(7, b"b")))
    log = FileReplicatedLog(directory)
    assert [e.base_offset for e in log.read()] == [0]
