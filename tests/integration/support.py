"""Shared pieces of the client tests: the record mix every client sends, and the comparisons.

Each client test produces the same mix (keyed and null-keyed records, tombstones, empty values,
headers, one ~1 MiB record, explicit partitions and the client's default partitioner), learns the
(partition, offset) of every record from the client's delivery reports, consumes, and then requires
the consumed records to be exactly the sent ones, byte for byte, in offset order per partition.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
BIG_RECORD_BYTES = 1024 * 1024
# Kafka's default record-batch limit (message.max.bytes, 1048588) is too small for BIG_RECORD_BYTES
# plus its batch overhead, so topics that carry it raise max.message.bytes and clients their limits.
TOPIC_MAX_MESSAGE_BYTES = 2 * 1024 * 1024
CLIENT_MAX_BYTES = 4 * 1024 * 1024
BIG_TOPIC_CONFIG = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
DEADLINE_S = 30.0

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A record as produced (partition None: the client's partitioner chose) or as consumed."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int
    partition: int | None = None
    offset: int | None = None

    def describe(self) -> str:
        def short(data: bytes | None) -> str:
            if data is None:
                return "null"
            return repr(data) if len(data) <= 24 else f"<{len(data)} bytes {data[:8]!r}...>"

        return (
            f"p{self.partition}@{self.offset} ts={self.timestamp_ms} key={short(self.key)} "
            f"value={short(self.value)} headers={[(k, short(v)) for k, v in self.headers]}"
        )


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def record_mix(
    *,
    seed: int,
    partitions: int = PARTITIONS,
    big: bool = True,
    null_header_values: bool = True,
    duplicate_header_keys: bool = True,
    base_timestamp_ms: int | None = None,
) -> list[Record]:
    """The records every client sends; timestamps are explicit and strictly increasing."""
    rng = random.Random(seed)
    base = now_ms() - 60_000 if base_timestamp_ms is None else base_timestamp_ms
    clock = itertools.count(base)
    records: list[Record] = []

    def add(key: bytes | None, value: bytes | None, headers: Headers, partition: int | None):
        records.append(
            Record(
                key=key,
                value=value,
                headers=headers,
                timestamp_ms=next(clock),
                partition=partition,
            )
        )

    for partition in range(partitions):
        add(b"key-%d" % partition, rng.randbytes(100), (), partition)
        add(None, b"null key to partition %d" % partition, (), partition)
        add(b"tombstone-%d" % partition, None, (), partition)
        add(b"empty-value-%d" % partition, b"", (), partition)
        headers: Headers = (
            ("h-text", b"partition %d" % partition),
            ("h-binary", rng.randbytes(16)),
        )
        if duplicate_header_keys:
            headers += (("h-text", b"second value for the same key"),)
        if null_header_values:
            headers += (("h-null", None),)
        add(rng.randbytes(8), rng.randbytes(300), headers, partition)
        add(b"", b"empty key", (("h-empty", b""),), partition)
    for index in range(12):
        # Keyed and null-keyed records left to the client's default partitioner.
        key = None if index % 3 == 0 else b"spread-%d" % index
        add(key, b"default partitioner %d " % index + rng.randbytes(40), (), None)
    if big:
        add(b"big", rng.randbytes(BIG_RECORD_BYTES), (("size", b"1MiB"),), 1 % partitions)
    # Compressible text, so codecs do real work.
    for index in range(20):
        add(
            b"text-%d" % (index % 4),
            b"the quick brown fox %d " % index * 20,
            (),
            index % partitions,
        )
    return records


def placed(record: Record, *, partition: int, offset: int) -> Record:
    """The sent record with the partition and offset the broker acknowledged."""
    if record.partition is not None:
        assert partition == record.partition, (
            f"record sent to partition {record.partition} acknowledged on partition {partition}"
        )
    return replace(record, partition=partition, offset=offset)


def check_acknowledged(acknowledged: Sequence[Record]) -> None:
    """Offsets per partition are distinct, and increase in the order the records were sent."""
    by_partition: dict[int, list[int]] = defaultdict(list)
    for record in acknowledged:
        assert record.partition is not None and record.offset is not None
        assert record.offset >= 0, f"negative offset acknowledged: {record.describe()}"
        by_partition[record.partition].append(record.offset)
    for partition, offsets in by_partition.items():
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), (
            f"partition {partition}: offsets acknowledged out of send order: {offsets}"
        )


def assert_same_records(
    expected: Iterable[Record], consumed: Iterable[Record], *, check_timestamps: bool = True
) -> None:
    """Consumed records equal the expected ones byte for byte, in offset order per partition."""
    want: dict[int, list[Record]] = defaultdict(list)
    for record in sorted(expected, key=lambda r: (r.partition or 0, r.offset or 0)):
        assert record.partition is not None
        want[record.partition].append(record)
    got: dict[int, list[Record]] = defaultdict(list)
    for record in consumed:  # keep the order the consumer delivered them in
        assert record.partition is not None
        got[record.partition].append(record)

    unexpected = set(got) - set(want)
    assert not unexpected, f"consumed from partitions {sorted(unexpected)} that got no records"
    for partition, records in want.items():
        received = got.get(partition, [])
        offsets = [r.offset for r in received]
        assert offsets == sorted(offsets), f"partition {partition}: out of order: {offsets}"
        assert [r.offset for r in records] == offsets, (
            f"partition {partition}: consumed offsets {offsets}, "
            f"expected {[r.offset for r in records]}"
        )
        for sent, back in zip(records, received, strict=True):
            mismatches = []
            if back.key != sent.key:
                mismatches.append("key")
            if back.value != sent.value:
                mismatches.append("value")
            if back.headers != sent.headers:
                mismatches.append("headers")
            if check_timestamps and back.timestamp_ms != sent.timestamp_ms:
                mismatches.append("timestamp")
            assert not mismatches, (
                f"partition {partition} offset {sent.offset}: {', '.join(mismatches)} differ\n"
                f"  sent:     {sent.describe()}\n  consumed: {back.describe()}"
            )


def count_by_partition(records: Iterable[Record]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for record in records:
        assert record.partition is not None
        counts[record.partition] += 1
    return dict(counts)


def wait_until(
    condition: Callable[[], object], *, timeout: float = DEADLINE_S, message: str = ""
) -> object:
    """Poll until condition() is truthy (returning it); fail with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s: {message}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
