"""What the group and transaction runtimes share: the coordinator partitions this node leads,
their background tasks, and one timer per partition at its core's next deadline.

Both runtimes wrap pure cores (`GroupCoordinator`, `TransactionCoordinator`) that never await and
never read a clock of their own: the runtime fires `tick()` when `next_deadline()` comes, writes
the records an operation returned, and reloads a partition from its log when a write fails (the
core is then ahead of the log). A subclass supplies how a partition loads, unloads, and how an
operation's result is completed.

A failed write answers `append_error_code(error)`: Kafka's mapping (CoordinatorRuntime), except
that KAFKA_STORAGE_ERROR answers COORDINATOR_NOT_AVAILABLE, not NOT_COORDINATOR. Kafka moves the
partition's leadership away from a failed disk, so NOT_COORDINATOR sends clients to the new
leader; here there may be no other replica, and a client told NOT_COORDINATOR by the only
coordinator there is asks again forever, while COORDINATOR_NOT_AVAILABLE makes it back off and
retry until the disk has room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError

_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
_TOO_LARGE = frozenset(
    {ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size}
)


def append_error_code(error: BaseException) -> ErrorCode:
    """What a coordinator answers when appending its records failed with `error`."""
    if isinstance(error, OSError):
        return ErrorCode.coordinator_not_available
    if not isinstance(error, KafkaError):
        return ErrorCode.not_coordinator
    if error.code in _NOT_AVAILABLE:
        return ErrorCode.coordinator_not_available
    if error.code in _TOO_LARGE:
        return ErrorCode.unknown_server_error
    return ErrorCode.not_coordinator


logger = logging.getLogger(__name__)


class _Core(Protocol):
    def next_deadline(self) -> int | None: ...

    def timers_now_ms(self) -> int: ...

    def tick(self) -> Any: ...


class LedPartition(Protocol):
    """The runtime's state of one coordinator partition (a dataclass in each runtime)."""

    index: int
    timer: asyncio.TimerHandle | None
    timer_deadline: int | None

    @property
    def coordinator(self) -> _Core: ...


P = TypeVar("P", bound=LedPartition)


class PartitionedRuntime(Generic[P]):
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._partitions: dict[int, P] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # What `follow_leadership` last said (partition -> leader epoch); None until it first
        # speaks (a node's start loads what `start` names).
        self._led: dict[int, int] | None = None
        self._loaded_epochs: dict[int, int] = {}  # the leader epoch a partition was loaded in

    # --------------------------------------------------------------------- for subclasses

    async def load_partition(self, index: int) -> None:
        raise NotImplementedError

    async def unload_partition(self, index: int) -> None:
        raise NotImplementedError

    async def _complete(self, partition: P, result: Any) -> Any:
        """Write the result's records, then deliver what it answered; returns its response."""
        raise NotImplementedError

    # ------------------------------------------------------------------------- lifecycle

    async def stop(self) -> None:
        for index in list(self._partitions):
            await self.unload_partition(index)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def follow_leadership(self, led: Mapping[int, int]) -> None:
        """Coordinate exactly the partitions this broker leads (`led`: partition -> leader
        epoch): load the ones it has come to lead, unload the ones it no longer leads, and load
        again one it leads in a new epoch (its leadership was lost and regained unseen: what it
        holds in memory may come from records the log has since truncated) — each in the
        background, in order. Kafka's coordinators load on every election, with its epoch."""
        self._led = dict(led)
        for index in sorted(set(self._partitions) - set(led)):
            self._loaded_epochs.pop(index, None)
            self._spawn(self.unload_partition(index))
        for index, epoch in sorted(led.items()):
            loaded_in = self._loaded_epochs.get(index)
            self._loaded_epochs[index] = epoch
            if index not in self._partitions:
                self._spawn(self.load_partition(index))
            elif loaded_in is not None and loaded_in != epoch:
                self._spawn(self._reload(index))

    async def _reload(self, index: int) -> None:
        """Load a partition again from its log (after a write failed, the core being ahead of
        the log) — unless this node no longer leads it: a node that just lost its leadership
        would read back its unreplicated tail, which its new leader is about to truncate, and
        keep serving from it once it leads again."""
        await self.unload_partition(index)
        if self._led is None or index in self._led:
            await self.load_partition(index)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        """Run in the background; `stop()` cancels what is still running."""

        async def run() -> None:
            try:
                await coroutine
            except KafkaError as error:  # the partition moved or went away: nothing to redo
                logger.info("coordinator background work stopped: %s", error)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---------------------------------------------------------------------------- timers

    def _reschedule(self, partition: P) -> None:
        """Keep one timer per partition, at the earliest deadline its core has."""
        deadline = partition.coordinator.next_deadline()
        if deadline is None:
            return
        if partition.timer is not None and partition.timer_deadline is not None:
            if partition.timer_deadline <= deadline:
                return
            partition.timer.cancel()
        delay = max(deadline - partition.coordinator.timers_now_ms(), 0) / 1000
        partition.timer = asyncio.get_running_loop().call_later(delay, self._on_timer, partition)
        partition.timer_deadline = deadline

    def _on_timer(self, partition: P) -> None:
        partition.timer = None
        partition.timer_deadline = None
        if self._partitions.get(partition.index) is not partition:
            return  # unloaded meanwhile
        result = partition.coordinator.tick()

        async def finish() -> None:
            with contextlib.suppress(KafkaError):
                await self._complete(partition, result)

        self._spawn(finish())
        self._reschedule(partition)
