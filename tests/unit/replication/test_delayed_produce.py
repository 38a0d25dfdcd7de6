"""acks=all (`delayed_produce.when_acknowledged`): every partition durable, timed out, or failed."""

from __future__ import annotations

import asyncio

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.delayed_produce import DurableCallback, when_acknowledged
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


def _appended(*tps: TopicPartition) -> list[tuple[TopicPartition, int]]:
    return [(tp, 10) for tp in tps]


def test_the_answer_waits_for_every_partition_and_reports_each_outcome() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        answers: list[list[int]] = []
        when_acknowledged(replicas, _appended(DONE, BROKEN, STUCK), 30.0, answers.append)
        assert answers == []
        replicas.release()
        assert answers == [[ErrorCode.none, ErrorCode.kafka_storage_error, ErrorCode.none]]

    asyncio.run(scenario())


def test_partitions_not_durable_by_the_timeout_answer_request_timed_out() -> None:
    async def scenario() -> None:
        replicas = _Replicas()
        done = asyncio.get_running_loop().create_future()
        when_acknowledged(replicas, _appended(DONE, STUCK), 0.05, done.set_result)
        codes = await asyncio.wait_for(done, 5)
        assert codes == [ErrorCode.none, ErrorCode.request_timed_out]
        replicas.release()  # durable after the answer went: nothing changes, no second answer
        assert codes == [ErrorCode.none, ErrorCode.request_timed_out]

    asyncio.run(scenario())


def test_partitions_already_durable_answer_at_once() -> None:
    async def scenario() -> None:
        answers: list[list[int]] = []
        when_acknowledged(_Replicas(), _appended(DONE, DONE), 30.0, answers.append)
        assert answers == [[ErrorCode.none, ErrorCode.none]]

    asyncio.run(scenario())
