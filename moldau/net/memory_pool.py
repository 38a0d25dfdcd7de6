"""The node's budget of memory for large request frames (Kafka's `queued.max.request.bytes`).

A connection reserves a large frame's whole size when its size prefix arrives (`FrameDecoder`),
before any of its body is kept, and releases it once the request has been answered. A connection
whose reservation is refused stops reading (Kafka mutes the channel) and waits here, first come
first served, until memory is released. The pool never refuses the only frame in flight, so a
frame as large as `socket.request.max.bytes` always gets through eventually.

A reservation whose frame is still arriving is a *claim*. Claims that arrive slowly are how a
client could hold the pool without paying for it (announce 8 MiB, trickle a few kB): while a
connection has waited RECLAIM_AFTER_S for memory, the pool closes the connections of claims older
than that which arrived at less than MIN_CLAIM_RATE bytes a second on average, slowest first,
until the first waiter fits. A frame that arrives at a usable speed is never closed this way.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

RECLAIM_AFTER_S = 0.2
MIN_CLAIM_RATE = 64 * 1024  # bytes a second


class Claimant(Protocol):
    """A connection whose reserved frame is still arriving."""

    def claim_progress(self) -> int:
        """Bytes of the claimed frame received so far."""
        ...

    def evict(self, reason: str) -> None:
        """Close the connection (its reservation is released as it closes)."""
        ...


@dataclass(slots=True)
class _Claim:
    size: int
    since: float


@dataclass(slots=True)
class _Waiter:
    callback: Callable[[], object]
    size: int
    since: float


class RequestMemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """`capacity`: bytes, or None for no limit (Kafka's -1)."""
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._claims: dict[Claimant, _Claim] = {}
        self._reclaim_timer: asyncio.TimerHandle | None = None

    def try_reserve(self, size: int, claimant: Claimant | None = None) -> bool:
        if self.capacity is not None and self.used and self.used + size > self.capacity:
            return False
        self.used += size
        if claimant is not None:
            self._claims[claimant] = _Claim(size, time.monotonic())
        return True

    def claimed(self, claimant: Claimant) -> None:
        """`claimant`'s frame has arrived whole: its reservation is no longer a claim."""
        self._claims.pop(claimant, None)

    def release(self, size: int) -> None:
        self.used -= size
        if self._waiters:
            # Every waiter retries in arrival order, each in its own turn of the loop; one that
            # fits stops waiting (`forget`), one that still does not keeps its place.
            loop = asyncio.get_running_loop()
            for waiter in self._waiters:
                loop.call_soon(waiter.callback)

    def wait(self, callback: Callable[[], object], size: int = 0) -> None:
        """Call `callback` on the loop once memory has been released (`size`: what the waiter
        needs, for reclaiming slow claims)."""
        if any(waiter.callback == callback for waiter in self._waiters):
            return
        self._waiters.append(_Waiter(callback, size, time.monotonic()))
        if self._reclaim_timer is None and self._claims:
            self._reclaim_timer = asyncio.get_running_loop().call_later(
                RECLAIM_AFTER_S, self._reclaim
            )

    def forget(self, callback: Callable[[], object], claimant: Claimant | None = None) -> None:
        """A connection is gone: it neither waits nor claims any more."""
        self._waiters = collections.deque(w for w in self._waiters if w.callback != callback)
        if claimant is not None:
            self._claims.pop(claimant, None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _reclaim(self) -> None:
        """Close slow claims while the first waiter has waited RECLAIM_AFTER_S and does not fit."""
        self._reclaim_timer = None
        if not self._waiters or self.capacity is None:
            return
        now = time.monotonic()
        first = self._waiters[0]
        if now - first.since >= RECLAIM_AFTER_S:
            needed = self.used + first.size - self.capacity
            slow = sorted(
                (
                    (claimant.claim_progress() / (now - claim.since), claimant, claim)
                    for claimant, claim in self._claims.items()
                    if now - claim.since >= RECLAIM_AFTER_S
                ),
                key=lambda entry: entry[0],
            )
            for rate, claimant, claim in slow:
                if needed <= 0 or rate >= MIN_CLAIM_RATE:
                    break
                del self._claims[claimant]
                needed -= claim.size
                claimant.evict(
                    f"its {claim.size}-byte request arrived at {rate / 1024:.1f} KiB/s while "
                    "others waited for queued.max.request.bytes"
                )
        if self._waiters and self._claims:
            wait_s = max(RECLAIM_AFTER_S - (now - self._waiters[0].since), 0.05)
            self._reclaim_timer = asyncio.get_running_loop().call_later(wait_s, self._reclaim)
