"""Stopping a background task must not eat a cancellation of the task that stops it."""

from __future__ import annotations

import asyncio

import pytest

from moldau.client.tasks import stop_task


async def _slow_to_stop(stopping: asyncio.Event, swallow: bool) -> None:
    """A background task that needs a few loop turns to wind down once cancelled."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        stopping.set()
        await asyncio.sleep(0.01)
        if not swallow:
            raise


@pytest.mark.parametrize("swallow", [False, True], ids=["re-raises", "returns"])
def test_a_cancellation_arriving_while_waiting_for_the_task_is_raised(swallow: bool) -> None:
    async def scenario() -> tuple[bool, bool]:
        stopping = asyncio.Event()
        background = asyncio.create_task(_slow_to_stop(stopping, swallow))
        await asyncio.sleep(0)
        after_stop = False

        async def owner() -> None:
            nonlocal after_stop
            await stop_task(background)
            after_stop = True
            await asyncio.sleep(10)

        task = asyncio.create_task(owner())
        await stopping.wait()  # the owner now waits inside stop_task
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        return after_stop, background.done()

    after_stop, background_done = asyncio.run(scenario())
    assert not after_stop
    assert background_done


def test_a_close_running_under_an_earlier_cancellation_completes() -> None:
    async def scenario() -> list[str]:
        steps: list[str] = []
        background = asyncio.create_task(asyncio.Event().wait())

        async def owner() -> None:
            try:
                await asyncio.Event().wait()
            finally:  # what `async with Consumer(...)` runs when Ctrl-C cancels the command
                await stop_task(background)
                steps.append("stopped")
                await asyncio.sleep(0)
                steps.append("closed")

        task = asyncio.create_task(owner())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert background.cancelled()
        return steps

    assert asyncio.run(scenario()) == ["stopped", "closed"]


def test_an_already_finished_task_is_fine() -> None:
    async def scenario() -> None:
        done = asyncio.create_task(asyncio.sleep(0))
        await done
        await stop_task(done)

    asyncio.run(scenario())
