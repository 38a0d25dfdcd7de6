"""The node's budget of memory for large request frames (Kafka's `queued.max.request.bytes`).

A connection reserves a large frame's whole size when its size prefix arrives (`FrameDecoder`),
before any of its body is kept, and releases it once the request has been answered. A connection
whose reservation is refused stops reading (Kafka mutes the channel) and waits here, first come
first served, until memory is released. The pool never refuses the only frame in flight, so a
frame as large as `socket.request.max.bytes` always gets through eventually.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable


class RequestMemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """`capacity`: bytes, or None for no limit (Kafka's -1)."""
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    def try_reserve(self, size: int) -> bool:
        if self.capacity is not None and self.used and self.used + size > self.capacity:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used -= size
        if self._waiters:
            # Every waiter retries in arrival order, each in its own turn of the loop; one that
            # still does not fit waits again.
            waiters, self._waiters = self._waiters, collections.deque()
            loop = asyncio.get_running_loop()
            for callback in waiters:
                loop.call_soon(callback)

    def wait(self, callback: Callable[[], None]) -> None:
        """Call `callback` on the loop once memory has been released."""
        if callback not in self._waiters:
            self._waiters.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        return len(self._waiters)
