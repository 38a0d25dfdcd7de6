"""The files on disk are Kafka's: an independent decoder (kafka-python) reads our segments, and
segments written by kafka-python's encoder are loaded, recovered and served by us."""

from __future__ import annotations

import struct

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.clock import ManualClock
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import NewRecord, build_batch
from moldau.storage.config import LogConfig
from moldau.storage.filesystem import OsFileSystem
from moldau.storage.log_loader import load_partition_log
from moldau.types import TopicPartition

from .helpers import values_from

TP = TopicPartition("format", 0)
NOW = 1_700_000_000_000


def test_kafka_python_decodes_our_segment_files(tmp_path) -> None:
    directory = str(tmp_path / "format-0")
    config = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    log = load_partition_log(OsFileSystem(), directory, TP, config, clock=ManualClock(NOW))
    expected = []
    for i in range(60):
        codec = list(CompressionType)[i % 5]
        values = [b"value-%d-%d" % (i, j) for j in range(1 + i % 3)]
        raw = build_batch(
            [NewRecord(key=b"k%d" % i, value=v) for v in values],
            compression=codec,
            timestamp=NOW + i,
        )
        first = log.append_as_leader(raw, leader_epoch=2).first_offset
        expected += [(first + j, v) for j, v in enumerate(values)]
    log.close()
    seen = []
    logs = sorted(p for p in (tmp_path / "format-0").iterdir() if p.suffix == ".log")
    assert len(logs) > 2
    for path in logs:
        base = int(path.stem)
        memory = MemoryRecords(path.read_bytes())
        first_in_file = None
        while memory.has_next():
            found = memory.next_batch()
            assert found.validate_crc()
            assert found.leader_epoch == 2
            for record in found:
                first_in_file = record.offset if first_in_file is None else first_in_file
                seen.append((record.offset, record.value))
        assert first_in_file == base  # files are named by their base offset
        index = path.with_suffix(".index").read_bytes()
        entries = [struct.unpack_from(">ii", index, i) for i in range(0, len(index), 8)]
        positions = [p for _relative, p in entries]
        assert positions == sorted(set(positions)) and all(
            p < path.stat().st_size for p in positions
        )
        timeindex = path.with_suffix(".timeindex").read_bytes()
        assert len(timeindex) % 12 == 0
    assert seen == expected


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_segments_written_by_kafka_python_are_loaded_and_served(tmp_path, codec: int) -> None:
    directory = tmp_path / "format-0"
    directory.mkdir()
    data = bytearray()
    offset = 0
    for i in range(10):
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
        for j in range(3):
            builder.append(j, NOW + i, b"key%d" % i, b"v%d-%d" % (i, j), [])
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)  # base offset is outside the CRC
        data += batch
        offset += 3
    (directory / "00000000000000000000.log").write_bytes(bytes(data) + b"\x00\x00torn")
    log = load_partition_log(
        OsFileSystem(), str(directory), TP, LogConfig(), clock=ManualClock(NOW)
    )
    assert log.log_end_offset == 30  # the torn tail was cut by recovery
    assert [v for _o, v in values_from(log)] == [
        b"v%d-%d" % (i, j) for i in range(10) for j in range(3)
    ]
    assert (
        log.append_as_leader(
            build_batch([NewRecord(value=b"ours")], timestamp=NOW), leader_epoch=0
        ).first_offset
        == 30
    )
