"""The byte layout of Kafka's RecordBatch v2 (magic 2): its constants, the parsed header and the
decoded record. `records.py` builds and validates batches, `record_reader.py` reads their records;
both build on this module.

    RecordBatch (61-byte header, big-endian)            offset
      baseOffset            int64                          0
      batchLength           int32  bytes after this field  8
      partitionLeaderEpoch  int32                         12
      magic                 int8   (= 2)                  16
      crc                   uint32 CRC-32C of attributes..end   17
      attributes            int16                         21
          bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
          bit 3 timestampType (0 CreateTime, 1 LogAppendTime)
          bit 4 isTransactional, bit 5 isControlBatch, bit 6 hasDeleteHorizonMs
      lastOffsetDelta       int32                         23
      baseTimestamp         int64                         27
      maxTimestamp          int64                         35
      producerId            int64                         43
      producerEpoch         int16                         51
      baseSequence          int32                         53
      recordsCount          int32                         57
      records               (compressed as a whole)       61

    Record (zig-zag varints)
      length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
      keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
      headersCount varint, then per header: keyLength varint, key (UTF-8),
      valueLength varint (-1 = null), value

    Control record (in a control batch): key = version int16, type int16 (0 ABORT, 1 COMMIT);
      value = version int16, coordinatorEpoch int32   (Kafka's EndTransactionMarker)

The CRC covers attributes to the end, so rewriting baseOffset or partitionLeaderEpoch keeps it valid.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from moldau.protocol.compression import CompressionType

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
CRC_START = 21  # the CRC covers attributes .. end of batch
MAGIC = 2
NO_TIMESTAMP = -1
DEFAULT_MAX_RECORDS_SIZE = 64 * 1024 * 1024
# The smallest record: its length, attributes, timestamp and offset deltas, null key and value
# and no headers, one byte each. No batch of N bytes holds more than N / 7 uncompressed records.
MIN_RECORD_SIZE = 7
# Decoded bytes a batch may hold per byte of its topic's max.message.bytes.
MAX_EXPANSION = 16

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a batch. A tuple, so `HEADER.unpack_from` builds it cheaply."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        return cls._make(HEADER.unpack_from(buffer, position))

    @property
    def size(self) -> int:
        """Bytes of the whole batch, including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_BIT) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wrapping at int32 max, as Kafka does); -1 without one."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


class Record(NamedTuple):
    """One decoded record with its absolute offset and timestamp (a tuple: consumers and the
    cleaner decode millions of these, and tuples are the cheapest immutable objects to build)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
