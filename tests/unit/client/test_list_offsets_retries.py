"""ListOffsets asks again when a leader moved or died, and fails at once on an error retrying
cannot cure."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.client.config import ClientConfig
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.offsets import LATEST, list_offsets
from moldau.types import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Cluster:
    """Partition p is led by node p + 1; each node answers from its script, then NONE."""

    def __init__(self, scripts: dict[int, list[ErrorCode]]) -> None:
        self.config = ClientConfig({"retry.backoff.ms": 1, "request.timeout.ms": 2000})
        self.scripts = scripts
        self.asked: list[tuple[int, tuple[int, ...]]] = []
        self.refreshes = 0

    async def leader_connection(self, topic: str, partition: int) -> Any:
        return await self.connection(partition + 1)

    async def connection(self, node_id: int) -> Any:
        async def request(_api_key: int, body: dict[str, Any]) -> Any:
            asked = tuple(p["partition_index"] for t in body["topics"] for p in t["partitions"])
            self.asked.append((node_id, asked))
            script = self.scripts.get(node_id, [])
            code = script.pop(0) if script else ErrorCode.none
            partitions = [
                SimpleNamespace(partition_index=index, error_code=code, offset=100 + index,
                                timestamp=-1, leader_epoch=0)
                for index in asked
            ]  # fmt: skip
            return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=partitions)])

        return SimpleNamespace(node_id=node_id, request=request)

    async def refresh_metadata(self, topics: Any = None) -> None:
        self.refreshes += 1


def test_a_partition_whose_leader_moved_is_asked_again_alone() -> None:
    cluster = _Cluster({2: [ErrorCode.not_leader_or_follower]})
    results = asyncio.run(list_offsets(cluster, {TP0: LATEST, TP1: LATEST}))  # type: ignore[arg-type]
    assert {tp: r.offset for tp, r in results.items()} == {TP0: 100, TP1: 101}
    assert cluster.asked == [(1, (0,)), (2, (1,)), (2, (1,))]
    assert cluster.refreshes == 1


def test_an_error_retrying_cannot_cure_fails_at_once() -> None:
    cluster = _Cluster({1: [ErrorCode.topic_authorization_failed]})
    with pytest.raises(KafkaException) as raised:
        asyncio.run(list_offsets(cluster, {TP0: LATEST}))  # type: ignore[arg-type]
    assert raised.value.code is ErrorCode.topic_authorization_failed
    assert len(cluster.asked) == 1


def test_retries_stop_at_the_timeout() -> None:
    cluster = _Cluster({1: [ErrorCode.leader_not_available] * 1000})
    with pytest.raises(KafkaException) as raised:
        asyncio.run(list_offsets(cluster, {TP0: LATEST}, timeout=0.05))  # type: ignore[arg-type]
    assert raised.value.code is ErrorCode.leader_not_available
