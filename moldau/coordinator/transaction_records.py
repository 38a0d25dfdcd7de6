"""`__transaction_state` records: Kafka's TransactionLogKey and TransactionLogValue, byte for byte.

    TransactionLogKey (version 0):
      version int16 (0), transactional_id string (int16 length)
    TransactionLogValue version 0 (fixed-width):
      version int16 (0), producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
      transaction_status int8, transaction_partitions nullable array (int32 count) of
      {topic string, partition_ids array of int32}, transaction_last_update_timestamp_ms int64,
      transaction_start_timestamp_ms int64
    TransactionLogValue version 1 (flexible: compact strings and arrays, tagged fields):
      the same fields, plus tagged fields 0 previous_producer_id int64, 1 next_producer_id int64,
      2 client_transaction_version int16 (KIP-890). Version 1 is written only when one of them is
      not its default, so logs stay readable by older tools.

A null value (tombstone) removes an expired transactional id (Kafka's Dead state).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from moldau.coordinator._wire import Reader, RecordFormatError, Writer

__all__ = [
    "TransactionLogKey",
    "TransactionLogValue",
    "TransactionState",
    "decode_transaction_record",
    "encode_transaction_record",
]


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState, with the ids its log stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (Kafka's `stateName`)."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]
"""Partitions of a transaction grouped by topic, topics and partitions sorted."""


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: TopicPartitions = ()
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_transaction_record(
    key: TransactionLogKey, value: TransactionLogValue | None
) -> tuple[bytes, bytes | None]:
    key_bytes = Writer().int16(0).string(key.transactional_id).build()
    return key_bytes, None if value is None else _encode_value(value)


def _encode_value(value: TransactionLogValue) -> bytes:
    tagged: list[tuple[int, int, int]] = []  # (tag, size, value)
    if value.previous_producer_id != -1:
        tagged.append((0, 8, value.previous_producer_id))
    if value.next_producer_id != -1:
        tagged.append((1, 8, value.next_producer_id))
    if value.client_transaction_version != 0:
        tagged.append((2, 2, value.client_transaction_version))
    flexible = bool(tagged)
    writer = Writer().int16(1 if flexible else 0)
    writer.int64(value.producer_id).int16(value.producer_epoch)
    writer.int32(value.transaction_timeout_ms).int8(int(value.state))
    if flexible:
        writer.compact_array_length(len(value.partitions))
        for topic, partitions in value.partitions:
            writer.compact_string(topic).compact_array_length(len(partitions))
            for partition in partitions:
                writer.int32(partition)
            writer.no_tagged_fields()
    else:
        writer.int32(len(value.partitions))
        for topic, partitions in value.partitions:
            writer.string(topic).int32(len(partitions))
            for partition in partitions:
                writer.int32(partition)
    writer.int64(value.last_update_timestamp_ms).int64(value.start_timestamp_ms)
    if flexible:
        writer.uvarint(len(tagged))
        for tag, size, number in tagged:
            writer.uvarint(tag).uvarint(size)
            if size == 8:
                writer.int64(number)
            else:
                writer.int16(number)
    return writer.build()


def decode_transaction_record(
    key: bytes | None, value: bytes | None
) -> tuple[TransactionLogKey, TransactionLogValue | None] | None:
    """The record, or None for a key of another kind (skipped, as Kafka does)."""
    if key is None:
        raise RecordFormatError("a __transaction_state record needs a key")
    reader = Reader(key)
    if reader.int16() != 0:
        return None
    decoded_key = TransactionLogKey(reader.string())
    if value is None:
        return decoded_key, None
    return decoded_key, _decode_value(value)


def _decode_value(data: bytes) -> TransactionLogValue:
    reader = Reader(data)
    version = reader.int16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    flexible = version == 1
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    timeout_ms = reader.int32()
    state = TransactionState(reader.int8())
    partitions: list[tuple[str, tuple[int, ...]]] = []
    count = reader.compact_array_length() if flexible else reader.int32()
    for _ in range(max(count, 0)):
        topic = reader.compact_string() if flexible else reader.string()
        ids = reader.compact_array_length() if flexible else reader.int32()
        partitions.append((topic, tuple(reader.int32() for _ in range(ids))))
        if flexible:
            reader.skip_tagged_fields()
    last_update = reader.int64()
    start = reader.int64()
    tags = {0: -1, 1: -1, 2: 0}
    if flexible:
        for _ in range(reader.uvarint()):
            tag = reader.uvarint()
            size = reader.uvarint()
            if tag in (0, 1) and size == 8:
                tags[tag] = reader.int64()
            elif tag == 2 and size == 2:
                tags[tag] = reader.int16()
            else:
                for _ in range(size):
                    reader.int8()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        partitions=tuple(partitions),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=tags[0],
        next_producer_id=tags[1],
        client_transaction_version=tags[2],
    )
