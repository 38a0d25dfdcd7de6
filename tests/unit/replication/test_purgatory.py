"""The purgatory: parked operations complete on a wake that finds them ready, or at their timeout."""

from __future__ import annotations

import asyncio

from moldau.replication.purgatory import Purgatory


def test_a_wake_completes_ready_waiters_in_the_same_call_and_only_once() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        available = {"a": 0}
        outcomes: list[tuple[str, bool]] = []
        purgatory.watch(["a"], lambda: available["a"] >= 2, 30, lambda r: outcomes.append(("a", r)))
        purgatory.watch(["a", "b"], lambda: True, 30, lambda r: outcomes.append(("ab", r)))
        assert len(purgatory) == 3  # one waiter on a, one on a and b
        assert purgatory.delayed() == 2
        available["a"] = 1
        purgatory.wake("b")
        assert outcomes == [("ab", True)]
        purgatory.wake("a")  # a's waiter is still short; ab's is gone from every key
        assert outcomes == [("ab", True)]
        available["a"] = 2
        purgatory.wake("a")
        purgatory.wake("a")
        assert outcomes == [("ab", True), ("a", True)]
        assert len(purgatory) == 0 and purgatory.delayed() == 0

    asyncio.run(scenario())


def test_a_waiter_never_ready_completes_at_its_timeout() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        started = asyncio.get_running_loop().time()
        purgatory.watch(["a"], lambda: False, 0.05, done.set_result)
        purgatory.wake("a")
        assert await asyncio.wait_for(done, 5) is False
        assert asyncio.get_running_loop().time() - started >= 0.04
        assert len(purgatory) == 0

    asyncio.run(scenario())


def test_a_failing_check_completes_its_waiter_and_spares_the_others() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        outcomes: list[str] = []

        def broken() -> bool:
            raise OSError("log gone")

        purgatory.watch(["a"], broken, 30, lambda r: outcomes.append("broken"))
        purgatory.watch(["a"], lambda: True, 30, lambda r: outcomes.append("fine"))
        purgatory.wake("a")
        assert sorted(outcomes) == ["broken", "fine"]

    asyncio.run(scenario())


def test_expire_all_completes_everything_not_ready() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        outcomes: list[bool] = []
        purgatory.watch(["a"], lambda: False, 30, outcomes.append)
        purgatory.watch(["b"], lambda: False, 30, outcomes.append)
        purgatory.expire_all()
        assert outcomes == [False, False] and len(purgatory) == 0

    asyncio.run(scenario())
