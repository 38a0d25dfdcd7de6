"""Delayed operations that wait for a condition or a timeout (Kafka's DelayedOperationPurgatory).

A fetch that has fewer than `min_bytes` ready parks here keyed by the partitions it reads; an
append to one of them calls `wake(key)`, which re-checks the waiters on that key. The wait ends
when the check says so or when `max_wait_ms` passes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[Hashable, set[_Waiter]] = defaultdict(set)

    async def wait(
        self, keys: Iterable[Hashable], ready: Callable[[], bool], timeout_s: float
    ) -> bool:
        """Wait until `ready()` is true (checked on wake) or the timeout; return `ready()`."""
        if ready():
            return True
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), ready)
        key_list = list(keys)
        for key in key_list:
            self._waiters[key].add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in key_list:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[key]
            if not waiter.future.done():
                waiter.future.cancel()
        return ready()

    def wake(self, key: Hashable) -> None:
        waiting = self._waiters.get(key)
        if not waiting:
            return
        for waiter in list(waiting):
            if not waiter.future.done() and waiter.ready():
                waiter.future.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.wake(key)

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())


class _Waiter:
    __slots__ = ("future", "ready")

    def __init__(self, future: asyncio.Future[None], ready: Callable[[], bool]) -> None:
        self.future = future
        self.ready = ready
