"""The producer's batching, partitioning and retries against a scripted leader (no sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.client.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.partitioner import partition_for_key
from moldau.client.producer import Producer
from moldau.protocol.records import iter_batches


class ScriptedLeader:
    """Node 1 leads every partition; answers Produce with the scripted errors, then appends."""

    def __init__(self, partitions: int, errors: list[ErrorCode]) -> None:
        self.node_id = 1
        self.errors = list(errors)
        self.logs: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
        self.requests = 0
        topic = TopicInfo(
            "t",
            None,
            {p: PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(partitions)},
        )
        self.metadata = ClusterMetadata("c", 1, {}, {"t": topic})

    async def topic(self, name: str, **_: Any) -> TopicInfo:
        if name not in self.metadata.topics:
            raise KafkaException(ErrorCode.unknown_topic_or_partition, f"topic '{name}'")
        return self.metadata.topics[name]

    async def connection(self, node_id: int) -> ScriptedLeader:
        return self

    async def refresh_metadata(self, topics: Any = None) -> ClusterMetadata:
        return self.metadata

    async def close(self) -> None:
        pass

    async def request(self, api_key: int, data: dict[str, Any], **_: Any) -> Any:
        self.requests += 1
        error = self.errors.pop(0) if self.errors else ErrorCode.none
        responses = []
        for topic in data["topic_data"]:
            partitions = []
            for part in topic["partition_data"]:
                log = self.logs[part["index"]]
                base_offset = len(log)
                if error is ErrorCode.none:
                    for batch in iter_batches(part["records"]):
                        log.extend(r.value for r in batch.records())
                partitions.append(
                    SimpleNamespace(
                        index=part["index"], error_code=error, base_offset=base_offset,
                        log_append_time=None, error_message=None,
                    )
                )  # fmt: skip
            responses.append(SimpleNamespace(name=topic["name"], partition_responses=partitions))
        return SimpleNamespace(responses=responses)


def _run(leader: ScriptedLeader, produce: Any, **settings: Any) -> Any:
    async def scenario() -> Any:
        producer = Producer({"retry.backoff.ms": 1, "linger.ms": 1, **settings})
        producer.cluster = leader  # type: ignore[assignment]
        try:
            return await produce(producer)
        finally:
            await producer.close()

    return asyncio.run(scenario())


def test_keyed_records_go_to_the_murmur2_partition_in_order() -> None:
    leader = ScriptedLeader(partitions=4, errors=[])

    async def produce(producer: Producer) -> list[Any]:
        futures = [producer.produce("t", b"v%d" % i, b"key-%d" % (i % 3)) for i in range(30)]
        return [await f for f in futures]

    delivered = _run(leader, produce)
    for index, metadata in enumerate(delivered):
        assert metadata.partition == partition_for_key(b"key-%d" % (index % 3), 4)
    for partition, values in leader.logs.items():
        expected = [m.value for m in delivered if m.partition == partition]
        assert values == expected
        assert [m.offset for m in delivered if m.partition == partition] == list(range(len(values)))


def test_retriable_errors_are_retried_without_reordering() -> None:
    leader = ScriptedLeader(
        partitions=1, errors=[ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out]
    )

    async def produce(producer: Producer) -> list[int]:
        futures = [producer.produce("t", b"v%d" % i, partition=0) for i in range(10)]
        return [(await f).offset for f in futures]

    assert _run(leader, produce) == list(range(10))
    assert leader.logs[0] == [b"v%d" % i for i in range(10)]
    assert leader.requests >= 3


def test_fatal_errors_fail_the_records_with_the_code() -> None:
    leader = ScriptedLeader(partitions=1, errors=[ErrorCode.message_too_large])

    async def produce(producer: Producer) -> None:
        await producer.send("t", b"too big", partition=0)

    with pytest.raises(KafkaException) as raised:
        _run(leader, produce)
    assert raised.value.code is ErrorCode.message_too_large


def test_retries_stop_at_the_configured_count() -> None:
    leader = ScriptedLeader(partitions=1, errors=[ErrorCode.not_leader_or_follower] * 10)

    async def produce(producer: Producer) -> None:
        await producer.send("t", b"x", partition=0)

    with pytest.raises(KafkaException) as raised:
        _run(leader, produce, retries=2)
    assert raised.value.code is ErrorCode.not_leader_or_follower
    assert leader.requests == 3


def test_unknown_partition_and_topic_fail_at_once() -> None:
    leader = ScriptedLeader(partitions=2, errors=[])

    async def produce(producer: Producer) -> tuple[BaseException | None, BaseException | None]:
        bad_partition = producer.produce("t", b"x", partition=5)
        bad_topic = producer.produce("missing", b"x")
        await asyncio.wait([bad_partition, bad_topic])
        return bad_partition.exception(), bad_topic.exception()

    bad_partition, bad_topic = _run(leader, produce)
    assert isinstance(bad_partition, KafkaException) and "has no partition 5" in str(bad_partition)
    assert isinstance(bad_topic, KafkaException)
    assert bad_topic.code is ErrorCode.unknown_topic_or_partition
    assert leader.requests == 0
