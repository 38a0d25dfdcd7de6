"""acks=all: a produce's answer waits until its batches are replicated, Kafka's `DelayedProduce`.

Each partition's last appended offset must fall below the high watermark (every ISR member has
it, each durably: followers report only flushed offsets) and be fsynced here (group commit), or
the request's timeout pass: a partition still waiting then answers REQUEST_TIMED_OUT (its records
stay in the log, as in Kafka). A partition whose wait fails (leadership moved, the flush failed,
the ISR shrank below `min.insync.replicas` meanwhile) answers that error. No task and no future:
the callbacks run in the call chain of the flush or the follower's fetch that completes them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Protocol

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.partition import Partition
from moldau.types import TopicPartition

DurableCallback = Callable[[BaseException | None], None]


class ReplicatedWaits(Protocol):
    def get_partition(self, tp: TopicPartition) -> Partition | None: ...

    def when_replicated(
        self, tp: TopicPartition, offset: int, callback: DurableCallback, *, min_insync: int = 1
    ) -> None: ...


def when_acknowledged(
    hosted: ReplicatedWaits,
    appended: Sequence[tuple[TopicPartition, int]],
    timeout_s: float,
    on_done: Callable[[list[int]], None],
) -> None:
    """Call `on_done(codes)` once, each partition of `appended` (tp, last offset) with its error
    code (0: acknowledged), when all are settled or `timeout_s` has passed (0: no timeout)."""
    codes = [int(ErrorCode.none)] * len(appended)
    pending = set(range(len(appended)))
    finished = False
    timer: asyncio.TimerHandle | None = None

    def finish() -> None:
        nonlocal finished
        finished = True
        on_done(codes)

    def settled(index: int, error: BaseException | None) -> None:
        if finished:  # timed out before this partition was durable
            return
        if error is not None:
            codes[index] = (
                error.code if isinstance(error, KafkaError) else int(ErrorCode.kafka_storage_error)
            )
        pending.discard(index)
        if not pending:
            if timer is not None:
                timer.cancel()
            finish()

    def timed_out() -> None:
        for index in pending:
            codes[index] = int(ErrorCode.request_timed_out)
        finish()

    if timeout_s > 0:
        timer = asyncio.get_running_loop().call_later(timeout_s, timed_out)
    for index, (tp, last_offset) in enumerate(appended):
        partition = hosted.get_partition(tp)
        min_insync = partition.log.config.min_insync_replicas if partition is not None else 1
        hosted.when_replicated(
            tp, last_offset, functools.partial(settled, index), min_insync=min_insync
        )
