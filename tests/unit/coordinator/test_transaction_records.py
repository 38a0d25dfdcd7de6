"""`__transaction_state` record bytes: Kafka's TransactionLogKey / TransactionLogValue layouts."""

from __future__ import annotations

import struct

from moldau.coordinator.transaction_records import (
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
    decode_transaction_record,
    encode_transaction_record,
)


def test_key_and_version_0_value_bytes() -> None:
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=3,
        transaction_timeout_ms=60_000,
        state=TransactionState.ONGOING,
        partitions=(("t", (0, 2)),),
        last_update_timestamp_ms=11,
        start_timestamp_ms=10,
    )
    key, data = encode_transaction_record(TransactionLogKey("id"), value)
    assert key == b"\x00\x00\x00\x02id"
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60_000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 11, 10)
    )
    assert data == expected
    assert decode_transaction_record(key, data) == (TransactionLogKey("id"), value)


def test_version_1_carries_tagged_fields_and_round_trips() -> None:
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=0,
        transaction_timeout_ms=1000,
        state=TransactionState.PREPARE_COMMIT,
        partitions=(("a", (1,)), ("b", (0, 3))),
        previous_producer_id=6,
        client_transaction_version=2,
    )
    key, data = encode_transaction_record(TransactionLogKey("x"), value)
    assert data is not None and data[:2] == b"\x00\x01"
    assert decode_transaction_record(key, data) == (TransactionLogKey("x"), value)


def test_tombstone_and_foreign_key_versions() -> None:
    key, data = encode_transaction_record(TransactionLogKey("gone"), None)
    assert data is None
    assert decode_transaction_record(key, None) == (TransactionLogKey("gone"), None)
    assert decode_transaction_record(b"\x00\x05junk", b"") is None
