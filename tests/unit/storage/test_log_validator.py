"""Produce validation against decompression amplification: records per batch from the header,
keys and counts read without building records, recompression of the same record bytes, and a
per-request budget of decoded bytes."""

from __future__ import annotations

import random
import time

import cramjam
import pytest

from moldau.protocol.batch_layout import HEADER_SIZE
from moldau.protocol.compression import CompressionType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_reader import decode_records
from moldau.protocol.records import BatchHeader, NewRecord, build_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log_loader import load_partition_log
from moldau.storage.log_validator import DecodeBudget
from moldau.types import TopicPartition
from tests.bombs import (
    EMPTY_RECORD,
    KEYED_EMPTY_RECORD,
    PRODUCE_BOMB_RECORDS,
    claiming,
    empty_records_zstd,
)

from .helpers import open_log

NOW = 1_700_000_000_000
COMPACTED = LogConfig(cleanup_policy=("compact",))
RECOMPRESSED = LogConfig(compression_type="gzip")


@pytest.mark.parametrize(
    "config", [LogConfig(), COMPACTED, RECOMPRESSED], ids=["delete", "compacted", "recompressed"]
)
def test_the_issues_bomb_is_invalid_record_at_once_on_every_topic(
    filesystem, clock, config
) -> None:
    payload = empty_records_zstd(KEYED_EMPTY_RECORD, PRODUCE_BOMB_RECORDS)
    bomb = claiming(payload, PRODUCE_BOMB_RECORDS, timestamp=NOW)
    assert len(bomb) < 2000
    log = open_log(filesystem, clock, config)
    started = time.perf_counter()
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(bytearray(bomb), leader_epoch=0)
    assert time.perf_counter() - started < 0.05
    assert caught.value.code is ErrorCode.invalid_record
    assert log.log_end_offset == 0


def test_an_uncompressed_batch_over_the_record_limit_is_refused_by_the_fast_path(
    filesystem, clock
) -> None:
    config = LogConfig(max_message_bytes=700)  # at most 100 records of 7 bytes
    log = open_log(filesystem, clock, config)
    log.append_as_leader(
        claiming(EMPTY_RECORD * 90, 90, codec=CompressionType.NONE, timestamp=NOW), leader_epoch=0
    )
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(
            claiming(b"", 101, codec=CompressionType.NONE, timestamp=NOW), leader_epoch=0
        )
    assert caught.value.code is ErrorCode.invalid_record


def test_compacted_topic_reads_keys_and_counts_without_building_records(filesystem, clock) -> None:
    log = open_log(filesystem, clock, COMPACTED)
    keyed = [NewRecord(key=b"k%d" % i, value=b"v") for i in range(1000)]
    log.append_as_leader(
        build_batch(keyed, compression=CompressionType.ZSTD, timestamp=NOW), leader_epoch=0
    )
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(
            build_batch([*keyed, NewRecord(value=b"no key")], timestamp=NOW), leader_epoch=0
        )
    assert caught.value.code is ErrorCode.invalid_record
    # a header that declares fewer records than the data holds
    extra = claiming(bytes(cramjam.zstd.compress(KEYED_EMPTY_RECORD * 3)), 2, timestamp=NOW)
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(extra, leader_epoch=0)
    assert caught.value.code is ErrorCode.corrupt_message
    assert log.log_end_offset == 1000


def test_recompression_compresses_the_same_record_bytes(filesystem, clock) -> None:
    log = open_log(filesystem, clock, RECOMPRESSED)
    records = [
        NewRecord(key=b"k%d" % i, value=b"value-%d" % i, timestamp=NOW + i) for i in range(50)
    ]
    sent = build_batch(records, compression=CompressionType.ZSTD, producer_id=-1, timestamp=NOW)
    log.append_as_leader(sent, leader_epoch=3)
    stored = log.read(0, max_bytes=1 << 20, max_offset=50).read_bytes()
    [batch] = list(iter_batches(stored))
    assert batch.is_valid()
    assert batch.header.compression is CompressionType.GZIP
    sent_header = BatchHeader.parse(sent)
    assert batch.header._replace(
        attributes=0, crc=0, batch_length=0, partition_leader_epoch=0
    ) == sent_header._replace(attributes=0, crc=0, batch_length=0, partition_leader_epoch=0)
    assert cramjam.gzip.decompress(bytes(batch.data[HEADER_SIZE:])) == cramjam.zstd.decompress(
        sent[HEADER_SIZE:]
    )
    assert [(r.key, r.value, r.timestamp) for r in decode_records(batch.data)] == [
        (r.key, r.value, r.timestamp) for r in records
    ]


@pytest.mark.parametrize(
    ("codec", "levels"),
    [("gzip", {"compression.gzip.level": (1, 9)}), ("zstd", {"compression.zstd.level": (1, 9)})],
)
def test_recompression_uses_the_topics_level(filesystem, clock, codec, levels) -> None:
    """KIP-390: the higher level stores fewer bytes of the same records."""
    [(name, (low, high))] = levels.items()
    records = [NewRecord(value=b"order-%d,amount-%d;" % (i, i * 7 % 1000)) for i in range(2000)]
    sent = build_batch(records, producer_id=-1, timestamp=NOW)
    sizes = []
    for index, level in enumerate((low, high)):
        filesystem.makedirs(f"/levels-{index}")
        config = LogConfig.from_topic_config({"compression.type": codec, name: level})
        log = load_partition_log(
            filesystem, f"/levels-{index}/t-0", TopicPartition("t", 0), config, clock=clock
        )
        log.append_as_leader(sent, leader_epoch=0)
        [batch] = list(iter_batches(log.read(0, max_bytes=1 << 20, max_offset=2000).read_bytes()))
        assert batch.header.compression is CompressionType.from_name(codec)
        assert [r.value for r in decode_records(batch.data)] == [r.value for r in records]
        sizes.append(batch.header.size)
    assert sizes[1] < sizes[0]


def _partitions(filesystem, clock, count: int) -> list:
    filesystem.makedirs("/data")
    return [
        load_partition_log(
            filesystem, f"/data/t-{i}", TopicPartition("t", i), COMPACTED, clock=clock
        )
        for i in range(count)
    ]


def _append_all(logs, batch: bytes, budget: DecodeBudget) -> int:
    """Append `batch` to each log in turn, as one produce request does; how many succeeded."""
    for accepted, log in enumerate(logs):
        try:
            log.append_as_leader(bytearray(batch), leader_epoch=0, decode_budget=budget)
        except KafkaError as error:
            assert error.code is ErrorCode.corrupt_message
            assert "smaller requests" in error.message
            return accepted
    return len(logs)


def test_a_request_reads_one_batch_of_records_beyond_sixteen_times_its_bytes(
    filesystem, clock
) -> None:
    # ~60 bytes of zstd declaring 140,000 keyed records (under the 149,798 a batch may hold):
    # the first is read, the next is refused from its header, before any decompression
    bomb = claiming(empty_records_zstd(KEYED_EMPTY_RECORD, 140_000), 140_000, timestamp=NOW)
    logs = _partitions(filesystem, clock, 3)
    started = time.perf_counter()
    assert _append_all(logs, bomb, DecodeBudget()) == 1
    assert time.perf_counter() - started < 0.3  # one batch scanned, ~40 ms
    assert _append_all(logs[1:], bomb, DecodeBudget()) == 1  # a new request, a new budget


def test_a_request_decodes_one_batch_of_bytes_beyond_sixteen_times_its_bytes(
    filesystem, clock
) -> None:
    # one record of 1 MB of zeros in ~100 bytes of zstd: 16 fit one batch's 16.8 MB
    bomb = build_batch(
        [NewRecord(key=b"k", value=bytes(1 << 20))], compression=CompressionType.ZSTD, timestamp=NOW
    )
    assert len(bomb) < 200
    budget = DecodeBudget()
    assert _append_all(_partitions(filesystem, clock, 20), bomb, budget) == 16
    assert budget.decoded <= 16 * 1048588 + 16 * budget.carried + (1 << 20) + 100


def test_ordinary_compressed_batches_fit_a_request_budget(filesystem, clock) -> None:
    # 40 MB of hex values compressed about 2:1, well past one batch's 16.8 MB: all accepted
    rng = random.Random(5)
    records = [
        NewRecord(key=b"key-%d" % i, value=rng.randbytes(45).hex().encode()) for i in range(10_000)
    ]
    batch = build_batch(records, compression=CompressionType.ZSTD, timestamp=NOW)
    assert 1.5 < 1_000_000 / len(batch) < 4
    assert _append_all(_partitions(filesystem, clock, 40), batch, DecodeBudget()) == 40


def test_without_a_request_budget_each_append_has_its_own(filesystem, clock) -> None:
    bomb = claiming(empty_records_zstd(KEYED_EMPTY_RECORD, 140_000), 140_000, timestamp=NOW)
    log = open_log(filesystem, clock, COMPACTED)
    for _ in range(3):
        log.append_as_leader(bytearray(bomb), leader_epoch=0)
    assert log.log_end_offset == 3 * 140_000
