"""Delayed operations that wait for a condition or a timeout (Kafka's DelayedOperationPurgatory).

A fetch that has fewer than `min_bytes` ready parks here keyed by the partitions it reads; an
append to one of them calls `wake(key)`, which re-checks the waiters on that key and completes
those that are ready, in the same call: the appending request's call chain carries the parked
fetch's answer to its socket. A waiter that is never ready completes at its timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

log = logging.getLogger(__name__)


class Purgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[Hashable, set[_Waiter]] = defaultdict(set)

    def watch(
        self,
        keys: Iterable[Hashable],
        ready: Callable[[], bool],
        timeout_s: float,
        on_done: Callable[[bool], None],
    ) -> None:
        """Call `on_done(True)` once `ready()` is true after a `wake` of one of `keys`, or
        `on_done(False)` after `timeout_s`; exactly once. The caller checks `ready()` first."""
        waiter = _Waiter(self, tuple(keys), ready, on_done)
        for key in waiter.keys:
            self._waiters[key].add(waiter)
        waiter.timer = asyncio.get_running_loop().call_later(timeout_s, waiter.complete, False)

    def wake(self, key: Hashable) -> None:
        waiting = self._waiters.get(key)
        if not waiting:
            return
        for waiter in list(waiting):
            if waiter.done:
                continue
            try:
                ready = waiter.ready()
            except Exception:  # the waiter's own answer will show what is wrong
                log.exception("a delayed operation's check failed")
                ready = True
            if ready:
                waiter.complete(True)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.wake(key)

    def expire_all(self) -> None:
        """Complete every waiter now, ready or not (shutdown)."""
        for waiting in list(self._waiters.values()):
            for waiter in list(waiting):
                waiter.complete(False)

    def _forget(self, waiter: _Waiter) -> None:
        for key in waiter.keys:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiters[key]

    def __len__(self) -> int:
        """Watches: a waiter counts once per key it waits on (Kafka's PurgatorySize)."""
        return sum(len(w) for w in self._waiters.values())

    def delayed(self) -> int:
        """Waiters, each once (Kafka's NumDelayedOperations)."""
        return len({waiter for waiting in self._waiters.values() for waiter in waiting})


class _Waiter:
    __slots__ = ("done", "keys", "on_done", "purgatory", "ready", "timer")

    def __init__(
        self,
        purgatory: Purgatory,
        keys: tuple[Hashable, ...],
        ready: Callable[[], bool],
        on_done: Callable[[bool], None],
    ) -> None:
        self.purgatory = purgatory
        self.keys = keys
        self.ready = ready
        self.on_done = on_done
        self.done = False
        self.timer: asyncio.TimerHandle | None = None

    def complete(self, ready: bool) -> None:
        if self.done:
            return
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
        self.purgatory._forget(self)
        try:
            self.on_done(ready)
        except Exception:
            log.exception("a delayed operation failed to complete")
