"""`Producer.send_batch`: pre-built batches, several requests in flight per partition, retried in
order, against a scripted leader that checks sequences as the broker does (no sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.client.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.producer import Producer
from moldau.protocol.records import BatchHeader, NewRecord, build_batch, iter_batches

PRODUCER_ID = 7


def batch(first: int, count: int, *, sequenced: bool = False) -> bytes:
    """Records b"v<first>" ... as one batch; sequenced: base sequence `first` (transactional)."""
    records = [NewRecord(value=b"v%d" % i) for i in range(first, first + count)]
    if not sequenced:
        return build_batch(records)
    return build_batch(
        records, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=first, transactional=True
    )


class Leader:
    """Node 1 leads partitions 0..n-1 of topic t. Produce requests wait until `release` is set;
    errors are scripted per request (popped in arrival order) or found by the sequence check:
    a batch whose base sequence is not the next one is OUT_OF_ORDER_SEQUENCE_NUMBER, one
    already appended DUPLICATE_SEQUENCE_NUMBER."""

    def __init__(self, partitions: int = 1, errors: list[ErrorCode] | None = None) -> None:
        self.errors = list(errors or [])
        self.logs: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
        self.next_sequence: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.in_flight = 0
        self.most_in_flight = 0
        self.requests = 0
        self.release = asyncio.Event()
        self.release.set()
        topic = TopicInfo(
            "t", None, {p: PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(partitions)}
        )
        self.metadata = ClusterMetadata("c", 1, {}, {"t": topic})

    async def connection(self, node_id: int) -> Leader:
        return self

    async def refresh_metadata(self, topics: Any = None) -> ClusterMetadata:
        return self.metadata

    async def close(self) -> None:
        pass

    async def request(self, api_key: int, data: dict[str, Any], **_: Any) -> Any:
        self.requests += 1
        scripted = self.errors.pop(0) if self.errors else ErrorCode.none
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # as a real answer takes a while: other requests go out
            await self.release.wait()
        finally:
            self.in_flight -= 1
        responses = []
        for topic in data["topic_data"]:
            answers = []
            for part in topic["partition_data"]:
                error, base_offset = self._append(part["index"], bytes(part["records"]), scripted)
                answers.append(
                    SimpleNamespace(index=part["index"], error_code=error, base_offset=base_offset,
                                    log_append_time=None, error_message=None)
                )  # fmt: skip
            responses.append(SimpleNamespace(name=topic["name"], partition_responses=answers))
        return SimpleNamespace(responses=responses)

    def _append(self, partition: int, records: bytes, scripted: ErrorCode) -> tuple[ErrorCode, int]:
        log = self.logs[partition]
        if scripted is not ErrorCode.none:
            return scripted, -1
        header = BatchHeader.parse(records)
        if header.base_sequence >= 0:
            if header.base_sequence < self.next_sequence[partition]:
                return ErrorCode.duplicate_sequence_number, -1
            if header.base_sequence > self.next_sequence[partition]:
                return ErrorCode.out_of_order_sequence_number, -1
            self.next_sequence[partition] += header.records_count
        base_offset = len(log)
        for parsed in iter_batches(records):
            log.extend(r.value for r in parsed.records())
        return ErrorCode.none, base_offset


def _run(leader: Leader, scenario: Any, **settings: Any) -> Any:
    async def run() -> Any:
        producer = Producer({"retry.backoff.ms": 1, **settings})
        producer.cluster = leader  # type: ignore[assignment]
        try:
            return await scenario(producer)
        finally:
            await producer.close()

    return asyncio.run(run())


def values(first: int, last: int) -> list[bytes | None]:
    return [b"v%d" % i for i in range(first, last)]


def test_batches_go_in_order_with_several_requests_in_flight_per_partition() -> None:
    leader = Leader()

    async def scenario(producer: Producer) -> list[int]:
        leader.release.clear()
        futures = [producer.send_batch("t", 0, batch(10 * i, 10)) for i in range(12)]
        await asyncio.sleep(0.05)
        in_flight_while_held = leader.in_flight
        assert len(producer) == 12
        leader.release.set()
        assert await producer.flush(5) == 0
        assert in_flight_while_held == 5  # max.in.flight.requests.per.connection
        return [await f for f in futures]

    assert _run(leader, scenario) == list(range(0, 120, 10))
    assert leader.logs[0] == values(0, 120)


def test_one_request_carries_the_next_batch_of_each_partition_it_leads() -> None:
    leader = Leader(partitions=3)

    async def scenario(producer: Producer) -> None:
        leader.release.clear()
        for partition in range(3):
            producer.send_batch("t", partition, batch(0, 5))
        await asyncio.sleep(0.05)
        leader.release.set()
        await producer.flush(5)

    _run(leader, scenario)
    assert leader.requests == 1
    assert all(log == values(0, 5) for log in leader.logs.values())


def test_a_failed_sequenced_batch_goes_again_with_those_behind_it_in_order() -> None:
    # batch 0 is written alone first; batch 1 fails (retriable), batches 2-4 in flight behind it
    # are refused as out of order; all four go again, in order, once each
    leader = Leader(errors=[ErrorCode.none, ErrorCode.not_leader_or_follower])

    async def scenario(producer: Producer) -> list[int]:
        futures = [producer.send_batch("t", 0, batch(10 * i, 10, sequenced=True)) for i in range(5)]
        return [await f for f in futures]

    assert _run(leader, scenario) == [0, 10, 20, 30, 40]
    assert leader.logs[0] == values(0, 50)
    assert leader.most_in_flight > 1


def test_a_sequenced_partition_waits_for_its_first_batch_before_pipelining() -> None:
    leader = Leader()

    async def scenario(producer: Producer) -> int:
        leader.release.clear()
        for i in range(4):
            producer.send_batch("t", 0, batch(10 * i, 10, sequenced=True))
        await asyncio.sleep(0.05)
        held = leader.in_flight
        leader.release.set()
        await producer.flush(5)
        return held

    assert _run(leader, scenario) == 1
    assert leader.logs[0] == values(0, 40)


def test_a_batch_the_broker_already_has_counts_as_written() -> None:
    leader = Leader()
    leader.next_sequence[0] = 10  # the broker appended it before an answer was lost

    async def scenario(producer: Producer) -> int:
        return await producer.send_batch("t", 0, batch(0, 10, sequenced=True))

    assert _run(leader, scenario) == -1
    assert leader.logs[0] == []


def test_a_non_retriable_error_fails_the_batch_with_its_code() -> None:
    leader = Leader(errors=[ErrorCode.message_too_large])

    async def scenario(producer: Producer) -> None:
        await producer.send_batch("t", 0, batch(0, 3))

    with pytest.raises(KafkaException) as raised:
        _run(leader, scenario)
    assert raised.value.code is ErrorCode.message_too_large


def test_retries_stop_at_the_configured_count() -> None:
    leader = Leader(errors=[ErrorCode.not_leader_or_follower] * 5)

    async def scenario(producer: Producer) -> None:
        await producer.send_batch("t", 0, batch(0, 3))

    with pytest.raises(KafkaException) as raised:
        _run(leader, scenario, retries=2)
    assert raised.value.code is ErrorCode.not_leader_or_follower
    assert leader.requests == 3
