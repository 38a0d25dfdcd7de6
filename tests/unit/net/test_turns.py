"""The node's client turns share a budget per round of the event loop (moldau.net.turns)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from moldau.net.turns import TurnScheduler


def _turn(log: list[str], name: str, cost_s: float) -> Callable[[], float]:
    def run() -> float:
        log.append(name)
        return cost_s

    return run


async def _iterations(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_a_fresh_turn_runs_at_once_while_the_budget_lasts() -> None:
    async def scenario() -> None:
        scheduler = TurnScheduler(budget_s=0.002)
        log: list[str] = []
        assert scheduler.run_fresh(_turn(log, "a", 0.0015)) is None
        assert scheduler.run_fresh(_turn(log, "b", 0.0015)) is None  # 1.5 ms spent of 2
        queued = scheduler.run_fresh(_turn(log, "c", 0.0001))  # 3 ms spent: the next round
        assert queued is not None and log == ["a", "b"]
        await _iterations(1)
        assert log == ["a", "b", "c"] and scheduler.queued == 0

    asyncio.run(scenario())


def test_a_round_runs_its_budget_of_turns_then_lets_the_loop_run_everything_else() -> None:
    async def scenario() -> None:
        scheduler = TurnScheduler(budget_s=0.002)
        log: list[str] = []
        for index in range(10):
            scheduler.queue_backlog(_turn(log, f"flood-{index}", 0.001))
        loop = asyncio.get_running_loop()
        loop.call_soon(log.append, "controller")  # ready after the first round was scheduled
        await _iterations(1)
        assert log == ["flood-0", "flood-1", "controller"]
        loop.call_soon(log.append, "controller again")
        await _iterations(1)
        assert log[3:] == ["flood-2", "flood-3", "controller again"]
        await _iterations(4)
        assert log[-1] == "flood-9" and scheduler.queued == 0

    asyncio.run(scenario())


def test_fresh_turns_and_backlog_turns_alternate() -> None:
    async def scenario() -> None:
        scheduler = TurnScheduler(budget_s=0.002)
        log: list[str] = []
        scheduler.run_fresh(_turn(log, "spend", 0.002))
        for index in range(6):
            scheduler.queue_backlog(_turn(log, f"backlog-{index}", 0.001))
        scheduler.run_fresh(_turn(log, "fresh", 0.001))  # budget spent: queued
        await _iterations(1)
        assert log == ["spend", "fresh", "backlog-0"]  # not behind six backlog turns

    asyncio.run(scenario())


def test_a_cancelled_turn_is_skipped_and_costs_nothing() -> None:
    async def scenario() -> None:
        scheduler = TurnScheduler(budget_s=0.002)
        log: list[str] = []
        first = scheduler.queue_backlog(_turn(log, "closed", 0.002))
        scheduler.queue_backlog(_turn(log, "open", 0.001))
        first.cancel()
        await _iterations(1)
        assert log == ["open"] and scheduler.queued == 0

    asyncio.run(scenario())
