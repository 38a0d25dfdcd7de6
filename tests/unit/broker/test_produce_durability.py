"""acks=all answers of the Produce handler: every partition durable, timed out, or failed."""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.broker.handlers.produce import _when_durable
from moldau.net.deferred import Deferred
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import DurableCallback
from moldau.types import TopicPartition

DONE, STUCK, BROKEN = (
    TopicPartition("done", 0),
    TopicPartition("stuck", 0),
    TopicPartition("broken", 0),
)


class _Replicas:
    """Durability at once, never (until `release`), or a failed flush."""

    def __init__(self) -> None:
        self.stuck: list[DurableCallback] = []

    def get_partition(self, tp: TopicPartition) -> None:
        return None

    def when_replicated(
        self, tp: TopicPartition, offset: int, callback: DurableCallback, *, min_insync: int = 1
    ) -> None:
        if tp == DONE:
            callback(None)
        elif tp == BROKEN:
            callback(KafkaError(ErrorCode.kafka_storage_error, "disk gone"))
        else:
            self.stuck.append(callback)

    def release(self) -> None:
        for callback in self.stuck:
            callback(None)


def _waits(*tps: TopicPartition) -> list[tuple[dict[str, Any], TopicPartition, int]]:
    return [({"index": 0, "error_code": ErrorCode.none}, tp, 10) for tp in tps]


async def _answer(deferred: Deferred) -> Any:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    deferred.then(future.set_result)
    return await asyncio.wait_for(future, 5)


def test_the_answer_waits_for_every_partition_and_reports_each_outcome() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        waits = _waits(DONE, BROKEN, STUCK)
        body = {"responses": [w[0] for w in waits]}
        deferred = _when_durable(replicas, waits, 30.0, body)
        assert not deferred.resolved
        replicas.release()
        assert deferred.resolved
        assert await _answer(deferred) is body
        codes = [w[0]["error_code"] for w in waits]
        assert codes == [ErrorCode.none, ErrorCode.kafka_storage_error, ErrorCode.none]

    asyncio.run(scenario())


def test_partitions_not_durable_by_the_timeout_answer_request_timed_out() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        waits = _waits(DONE, STUCK)
        answer = await _answer(_when_durable(replicas, waits, 0.05, {}))
        assert answer == {}
        codes = [w[0]["error_code"] for w in waits]
        assert codes == [ErrorCode.none, ErrorCode.request_timed_out]
        replicas.release()  # durable after the answer went: nothing changes
        assert waits[1][0]["error_code"] == ErrorCode.request_timed_out

    asyncio.run(scenario())


def test_partitions_already_durable_answer_at_once() -> None:
    async def scenario() -> None:
        deferred = _when_durable(_Replicas(), _waits(DONE, DONE), 30.0, {"ok": True})
        assert deferred.resolved
        assert await _answer(deferred) == {"ok": True}

    asyncio.run(scenario())
