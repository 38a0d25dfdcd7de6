"""acks=all answers of the Produce handler: every partition durable, timed out, or failed."""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.broker.handlers.produce import _when_durable
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

DONE, STUCK, BROKEN = (
    TopicPartition("done", 0),
    TopicPartition("stuck", 0),
    TopicPartition("broken", 0),
)


class _Replicas:
    """wait_durable futures: done at once, never done, or failed with a storage error."""

    def __init__(self) -> None:
        self.waits: list[asyncio.Future[None]] = []

    def wait_durable(self, tp: TopicPartition, offset: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if tp == DONE:
            future.set_result(None)
        elif tp == BROKEN:
            future.set_exception(KafkaError(ErrorCode.kafka_storage_error, "disk gone"))
        self.waits.append(future)
        return future


def _waits(*tps: TopicPartition) -> list[tuple[dict[str, Any], TopicPartition, int]]:
    return [({"index": 0, "error_code": ErrorCode.none}, tp, 10) for tp in tps]


def test_the_answer_waits_for_every_partition_and_reports_each_outcome() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        waits = _waits(DONE, BROKEN)
        body = {"responses": [w[0] for w in waits]}
        answer = await asyncio.wait_for(_when_durable(replicas, waits, 30.0, body), 5)
        assert answer is body
        assert [w[0]["error_code"] for w in waits] == [
            ErrorCode.none,
            ErrorCode.kafka_storage_error,
        ]

    asyncio.run(scenario())


def test_partitions_not_durable_by_the_timeout_answer_request_timed_out() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        waits = _waits(DONE, STUCK)
        answer = await asyncio.wait_for(_when_durable(replicas, waits, 0.05, {}), 5)
        assert answer == {}
        assert [w[0]["error_code"] for w in waits] == [ErrorCode.none, ErrorCode.request_timed_out]
        assert replicas.waits[1].cancelled()  # the waiter is dropped; the flush itself runs on

    asyncio.run(scenario())


def test_a_cancelled_answer_stops_its_timer() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        waits = _waits(STUCK)
        answer = _when_durable(replicas, waits, 0.05, {})
        answer.cancel()
        await asyncio.sleep(0.1)  # past the timeout: nothing may fire on the cancelled answer
        assert waits[0][0]["error_code"] == ErrorCode.none
        assert not replicas.waits[0].done()

    asyncio.run(scenario())
