"""What a coordinator operation returns, and the timer queue the cores schedule into.

An operation returns `CoordinatorResult(records, response, deliveries)`: the records to append to
`__consumer_offsets`, the immediate response (None while the request is parked, as JoinGroup is
until the rebalance completes), and responses of parked requests that this operation completed.
The runtime appends the records first, then sends `response` and every delivery.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from moldau.coordinator.records import CoordinatorRecord

Response = dict[str, Any]
"""A response body with the newest version's field names (the broker adapter picks the rest)."""

Responder = Callable[[Response], None]
"""Called exactly once with the response of a parked request."""


@dataclass(slots=True)
class CoordinatorResult:
    records: list[CoordinatorRecord] = field(default_factory=list)
    response: Response | None = None
    deliveries: list[tuple[Responder, Response]] = field(default_factory=list)
    # (producer id, producer epoch) when the records go in a transactional batch (TxnOffsetCommit)
    producer: tuple[int, int] | None = None

    def merge(self, other: CoordinatorResult) -> None:
        """Fold the records and deliveries of `other` into this result (not its response)."""
        self.records.extend(other.records)
        self.deliveries.extend(other.deliveries)


class Timers:
    """Deadlines by key, earliest first; rescheduling or cancelling a key is O(log n).

    Stale heap entries are skipped lazily, and the heap is rebuilt when they dominate it.
    """

    def __init__(self) -> None:
        self._deadlines: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = 0

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        self._sequence += 1
        heapq.heappush(self._heap, (deadline_ms, self._sequence, key))
        if len(self._heap) > 2 * len(self._deadlines) + 64:
            self._heap = [
                (deadline, self._sequence + index, key)
                for index, (key, deadline) in enumerate(self._deadlines.items(), start=1)
            ]
            self._sequence += len(self._heap)
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._deadlines.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.get(key)

    def _drop_stale(self) -> None:
        while self._heap:
            deadline, _, key = self._heap[0]
            if self._deadlines.get(key) == deadline:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> list[Hashable]:
        """Remove and return the keys whose deadline is at or before `now_ms`, earliest first."""
        expired: list[Hashable] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return expired
            _, _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            expired.append(key)

    def clear(self) -> None:
        self._deadlines.clear()
        self._heap.clear()
