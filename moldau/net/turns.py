"""The share of the event loop that a node's client connections take together.

A combined node runs its broker and its controller on one event loop. Each client connection
bounds its own turn (`FRAMES_PER_TURN`, `TURN_BUDGET_S` in connection.py), but fifty connections
that each take their turn, and each start a costly request (Metadata for every topic: about
2 ms of encoding), make one iteration of the loop last 100 ms; every callback of the quorum and
the controller waits that long, several times over for one metadata change. Kafka gives client
requests their own threads (`num.io.threads`) and the controller its own.

`TurnScheduler` gives client work a budget per round: a connection's turn runs at once while
the round's budget lasts, and is queued otherwise; a round, scheduled with `call_soon`, starts
after everything already ready on the loop (quorum fetches, controller events, timers, the
steps of the tasks that earlier turns started), resets the budget and runs queued turns until
it is spent. A turn charges what it took, plus `TASK_COST_S` for each request it handed to a
task (that work runs later, outside the turn). So one iteration of the loop holds about a
round's budget of client work, whatever the number of connections.

Two queues share a round in turns: turns for new bytes from the socket (`fresh`: a client that
sent a request and waits for it) and turns that go on with frames already buffered
(`backlog`: a client that pipelined more than a turn takes). A flood of pipelined requests then
delays a newly arrived request by a round or two, not by the whole backlog.

Controller listeners do not use it: their connections are few and theirs is the work the budget
protects.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

__all__ = ["ROUND_BUDGET_S", "TASK_COST_S", "QueuedTurn", "TurnScheduler"]

# Client work per round: about one iteration of the loop.
ROUND_BUDGET_S = 0.001
# What a request handed to a task is charged (its work runs after the turn): a costly request,
# as Metadata for every topic of a large cluster is.
TASK_COST_S = 0.001

Turn = Callable[[], float]  # runs a turn, returns the seconds it charges


class QueuedTurn:
    """A turn waiting for a round; `cancel()` drops it (its connection closed)."""

    __slots__ = ("cancelled", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TurnScheduler:
    def __init__(self, budget_s: float = ROUND_BUDGET_S) -> None:
        self._budget_s = budget_s
        self._spent = 0.0
        self._fresh: collections.deque[QueuedTurn] = collections.deque()
        self._backlog: collections.deque[QueuedTurn] = collections.deque()
        self._fresh_next = True  # which queue a round takes from next
        self._round: asyncio.Handle | None = None

    @property
    def queued(self) -> int:
        return len(self._fresh) + len(self._backlog)

    def run_fresh(self, turn: Turn) -> QueuedTurn | None:
        """A turn for bytes that just arrived: run now while the budget lasts (None), queued
        otherwise (the entry to cancel)."""
        if not self._fresh and self._spent < self._budget_s:
            self._spent += turn()
            self._ensure_round()  # (which starts the next budget)
            return None
        return self._queue(self._fresh, turn)

    def queue_backlog(self, turn: Turn) -> QueuedTurn:
        """A turn that goes on with frames already buffered: always queued."""
        return self._queue(self._backlog, turn)

    def _queue(self, queue: collections.deque[QueuedTurn], turn: Turn) -> QueuedTurn:
        entry = QueuedTurn(turn)
        queue.append(entry)
        self._ensure_round()
        return entry

    def _ensure_round(self) -> None:
        if self._round is None:
            self._round = asyncio.get_running_loop().call_soon(self._run_round)

    def _run_round(self) -> None:
        self._round = None
        self._spent = 0.0
        while self._spent < self._budget_s:
            entry = self._next()
            if entry is None:
                break
            if not entry.cancelled:
                self._spent += entry.turn()
        if self._fresh or self._backlog:
            self._ensure_round()

    def _next(self) -> QueuedTurn | None:
        first, second = (
            (self._fresh, self._backlog) if self._fresh_next else (self._backlog, self._fresh)
        )
        self._fresh_next = not self._fresh_next
        if first:
            return first.popleft()
        if second:
            return second.popleft()
        return None
