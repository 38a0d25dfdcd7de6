"""Offsets by timestamp (ListOffsets) and of the largest timestamp (MAX_TIMESTAMP, KIP-734), as
Kafka's `LogSegment.findOffsetByTimestamp` and `FileRecords.searchForTimestamp` find them.

The time index names where to start; batch headers name the first batch whose max timestamp
reaches the target. Its header alone is the answer when every record of it carries one
timestamp (LogAppendTime, or first timestamp = max timestamp) and it starts at a record; any
other batch has to be read to find the record, by `first_record_at_or_after`, within the topic's
`BatchLimits`. A lookup called with `read_records=False` reads nothing: it answers what headers
answer and otherwise returns a `Lookup` with `exact=False`, so that a caller on the event loop
can do the reading in a worker thread. A batch that cannot be read within the limits (a bomb
stored before they existed, or a corrupt one) answers its first offset: a consumer seeking there
reads a few records too early, never misses one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from moldau.protocol.errors import KafkaError
from moldau.protocol.record_reader import first_record_at_or_after
from moldau.protocol.records import BatchHeader, BatchLimits, RecordBatch, TimestampType
from moldau.storage.segment import LogSegment

__all__ = ["Lookup", "max_timestamp_offset", "offset_for_timestamp"]

log = logging.getLogger(__name__)
_REPORTED_MAX = 1024
_reported: set[tuple[str, int]] = set()


class Lookup(NamedTuple):
    offset: int
    timestamp: int
    exact: bool = True  # False: the first offset of the batch to read (read_records=False)


def offset_for_timestamp(
    segments: Sequence[LogSegment],
    timestamp: int,
    *,
    log_start_offset: int,
    limits: BatchLimits,
    read_records: bool,
) -> Lookup | None:
    """The first record at or after `log_start_offset` with a timestamp >= `timestamp`."""
    for segment in segments:
        if segment.max_timestamp < timestamp:
            continue
        _offset, position = segment.offset_index.lookup(segment.time_index.lookup(timestamp))
        for batch in segment.batches(position):
            header = batch.header
            if header.max_timestamp < timestamp or header.last_offset < log_start_offset:
                continue
            answer = _from_header(header, log_start_offset)
            if answer is not None:
                return answer
            if not read_records:
                return Lookup(
                    max(header.base_offset, log_start_offset), header.max_timestamp, False
                )
            found = _read(segment, batch, timestamp, log_start_offset, limits)
            if found is not None:
                return found
            # no record of the batch reaches its header's max timestamp: look further
    return None


def max_timestamp_offset(
    segment: LogSegment,
    found: tuple[int, BatchHeader] | None,
    *,
    limits: BatchLimits,
    read_records: bool,
) -> Lookup:
    """The first record with the largest timestamp of the log: in `segment` (the one with the
    largest), in the batch `found` at the offset of its largest timestamp (position, header)."""
    fallback = Lookup(segment.offset_of_max_timestamp, segment.max_timestamp)
    if found is None:
        return fallback
    position, header = found
    answer = _from_header(header, header.base_offset)
    if answer is not None:
        return answer
    if not read_records:
        return Lookup(header.base_offset, segment.max_timestamp, False)
    batch = RecordBatch(position, header, memoryview(segment.log.pread(header.size, position)))
    return _read(segment, batch, segment.max_timestamp, 0, limits) or fallback


def _from_header(header: BatchHeader, log_start_offset: int) -> Lookup | None:
    """The batch's first record, if the header says it is the answer: every record has the
    batch's max timestamp (LogAppendTime), or the first has (first timestamp = max), and the
    batch holds a record at every offset from its first (not thinned by compaction)."""
    if header.records_count != header.last_offset_delta + 1:
        return None
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return Lookup(max(header.base_offset, log_start_offset), header.max_timestamp)
    if header.base_timestamp == header.max_timestamp and header.base_offset >= log_start_offset:
        return Lookup(header.base_offset, header.max_timestamp)
    return None


def _read(
    segment: LogSegment,
    batch: RecordBatch,
    timestamp: int,
    log_start_offset: int,
    limits: BatchLimits,
) -> Lookup | None:
    header = batch.header
    try:
        found = first_record_at_or_after(
            batch.data,
            timestamp,
            max_size=limits.max_decoded_bytes,
            max_records=limits.max_records,
            min_offset=log_start_offset,
        )
    except KafkaError as error:
        key = (segment.directory, header.base_offset)
        if key not in _reported and len(_reported) < _REPORTED_MAX:
            _reported.add(key)
            log.warning(
                "%s: batch at offset %d cannot be read (%s); timestamp lookups in it answer "
                "its first offset",
                segment.directory,
                header.base_offset,
                error,
            )
        return Lookup(max(header.base_offset, log_start_offset), header.max_timestamp)
    return None if found is None else Lookup(*found)
