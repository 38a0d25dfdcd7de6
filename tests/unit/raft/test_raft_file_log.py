import os

import pytest

from moldau.raft.file_log import LOG_FILE_NAME, FileReplicatedLog, encode_entry
from moldau.raft.log import (
    LogEntry,
    MemoryReplicatedLog,
    OffsetAndEpoch,
    end_after_truncation,
)


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


def epochs_log(make_log):
    """Offsets 0-1 in epoch 1, 2-4 in epoch 3 (entries of 1, 1, 2 and 1 records), 5 in epoch 4."""
    log = make_log()
    log.append(entry(0, b"a", epoch=1))
    log.append(entry(1, b"b", epoch=1))
    log.append(entry(2, b"c", b"d", epoch=3))
    log.append(entry(4, b"e", epoch=3))
    log.append(entry(5, b"f", epoch=4))
    return log


def test_end_offset_for_epoch_is_where_the_largest_epoch_at_or_below_ends(make_log):
    log = make_log()
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(epoch=0, offset=0)
    log = epochs_log(make_log)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(epoch=0, offset=0)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(epoch=1, offset=2)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(epoch=1, offset=2)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(epoch=3, offset=5)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(epoch=4, offset=6)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(epoch=4, offset=6)
    log.truncate_to(4)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(epoch=3, offset=4)
    assert log.last_epoch == 3


def test_epochs_never_go_backwards_along_the_log(make_log):
    log = make_log()
    log.append(entry(0, b"a", epoch=2))
    with pytest.raises(ValueError):
        log.append(entry(1, b"b", epoch=1))


def test_read_stops_at_the_byte_limit_but_always_gives_one_entry(make_log):
    log = make_log()
    log.append(entry(0, b"x" * 100))
    log.append(entry(1, b"y" * 100))
    log.append(entry(2, b"z" * 100))
    one = log.read(0).__next__().size_in_bytes
    assert [e.base_offset for e in log.read(0, max_bytes=1)] == [0]
    assert [e.base_offset for e in log.read(0, max_bytes=2 * one)] == [0, 1]
    assert [e.base_offset for e in log.read(1, max_bytes=2 * one + 1)] == [1, 2]
    assert [e.base_offset for e in log.read(0, max_bytes=None)] == [0, 1, 2]


def test_the_entry_size_is_its_encoded_length():
    for records in [(b"",), (b"a", b"bc"), (b"x" * 1000,)]:
        value = entry(7, *records, epoch=3)
        assert value.size_in_bytes == len(encode_entry(value))


def test_end_after_truncation_drops_an_entry_cut_in_the_middle(make_log):
    log = epochs_log(make_log)
    assert end_after_truncation(log, 6) == OffsetAndEpoch(epoch=4, offset=6)
    assert end_after_truncation(log, 5) == OffsetAndEpoch(epoch=3, offset=5)
    assert end_after_truncation(log, 3) == OffsetAndEpoch(epoch=1, offset=2)  # 2-3 goes whole
    assert end_after_truncation(log, 1) == OffsetAndEpoch(epoch=1, offset=1)
    assert end_after_truncation(log, 0) == OffsetAndEpoch(epoch=0, offset=0)
    assert end_after_truncation(log, 10) == OffsetAndEpoch(epoch=4, offset=6)
    log.truncate_to(3)
    assert (log.end_offset, log.last_epoch) == (2, 1)


def test_a_truncation_is_durable(tmp_path):
    directory = str(tmp_path / "m")
    log = FileReplicatedLog(directory)
    log.append(entry(0, b"a"))
    log.append(entry(1, b"b", epoch=2))
    log.flush()
    log.truncate_to(1)
    log.append(entry(1, b"c", epoch=3))
    log.flush()
    log.close()
    reopened = FileReplicatedLog(directory)
    assert list(reopened.read()) == [entry(0, b"a"), entry(1, b"c", epoch=3)]
    assert reopened.end_offset_for_epoch(2) == OffsetAndEpoch(epoch=1, offset=1)


def test_a_crashed_memory_log_keeps_only_what_was_flushed():
    log = MemoryReplicatedLog()
    log.append(entry(0, b"a"))
    log.append(entry(1, b"b"))
    assert log.flush_up_to(1) == 1  # a flush that began before the second append
    log.append(entry(2, b"c", epoch=2))
    log.crash()
    assert [e.base_offset for e in log.read()] == [0]
    assert (log.end_offset, log.flushed_offset, log.last_epoch) == (1, 1, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(epoch=1, offset=1)


def test_recovery_stops_at_an_entry_of_an_earlier_epoch(tmp_path):
    directory = str(tmp_path / "m")
    os.makedirs(directory)
    with open(os.path.join(directory, LOG_FILE_NAME), "wb") as handle:
        handle.write(encode_entry(entry(0, b"a", epoch=3)) + encode_entry(entry(1, b"b", epoch=2)))
    log = FileReplicatedLog(directory)
    assert [e.base_offset for e in log.read()] == [0]


def test_a_log_can_start_after_a_snapshot(make_log):
    log = epochs_log(make_log)  # offsets 0-5, epochs 1, 1, 3, 3, 3, 4
    log.flush()
    with pytest.raises(ValueError):
        log.delete_before_snapshot(OffsetAndEpoch(epoch=3, offset=3))  # inside an entry
    with pytest.raises(ValueError):
        log.delete_before_snapshot(OffsetAndEpoch(epoch=1, offset=4))  # the wrong epoch
    log.delete_before_snapshot(OffsetAndEpoch(epoch=3, offset=4))
    assert log.log_start == OffsetAndEpoch(epoch=3, offset=4)
    assert [e.base_offset for e in log.read(0)] == [4, 5]
    assert (log.end_offset, log.last_epoch) == (6, 4)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(epoch=3, offset=4)  # the log start
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(epoch=3, offset=5)
    assert end_after_truncation(log, 4) == OffsetAndEpoch(epoch=3, offset=4)
    log.truncate_to_snapshot(OffsetAndEpoch(epoch=7, offset=20))
    assert list(log.read(0)) == []
    assert (log.end_offset, log.last_epoch, log.flushed_offset) == (20, 7, 20)
    with pytest.raises(ValueError):
        log.append(entry(0, b"too early"))
    log.append(entry(20, b"next", epoch=7))
    assert log.end_offset == 21


def test_a_reopened_file_log_starts_where_its_snapshot_ends(tmp_path):
    directory = str(tmp_path / "m")
    log = epochs_log(lambda: FileReplicatedLog(directory))
    log.flush()
    log.delete_before_snapshot(OffsetAndEpoch(epoch=3, offset=5))
    log.append(entry(6, b"g", epoch=4))
    log.flush()
    log.close()
    reopened = FileReplicatedLog(directory)
    assert reopened.log_start == OffsetAndEpoch(epoch=3, offset=5)
    assert [e.base_offset for e in reopened.read()] == [5, 6]
    reopened.truncate_to_snapshot(OffsetAndEpoch(epoch=9, offset=40))
    reopened.close()
    again = FileReplicatedLog(directory)
    assert (again.log_start, again.end_offset, list(again.read())) == (
        OffsetAndEpoch(epoch=9, offset=40),
        40,
        [],
    )


def test_recovery_finishes_a_snapshot_cut_that_a_crash_interrupted(tmp_path):
    directory = str(tmp_path / "m")
    log = epochs_log(lambda: FileReplicatedLog(directory))
    log.flush()
    log.close()
    # The crash came after log-start was written and before the file was rewritten.
    with open(os.path.join(directory, "log-start"), "w") as handle:
        handle.write('{"offset": 2, "epoch": 1}')
    recovered = FileReplicatedLog(directory)
    assert [e.base_offset for e in recovered.read()] == [2, 4, 5]
    assert os.path.getsize(os.path.join(directory, LOG_FILE_NAME)) == sum(
        e.size_in_bytes for e in recovered.read()
    )
    recovered.truncate_to(4)
    recovered.close()
    assert [e.base_offset for e in FileReplicatedLog(directory).read()] == [2]
