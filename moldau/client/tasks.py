"""Stopping a background task from a task that may itself be cancelled meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["stop_task"]


async def stop_task(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has ended.

    The task's own end (cancelled, or returning after catching the cancellation) is swallowed. A
    cancellation of the calling task that arrives during the wait is not: it is raised here. (A
    bare `suppress(CancelledError)` around `await task` drops it, because cancelling a task that
    awaits another task cancels the awaited one, and the caller sees only that task's
    CancelledError; Ctrl-C on the CLI then leaves the consumer running.) A cancellation requested
    before the call, such as the one a `close()` on the way out of a cancelled task runs under, is
    not raised again.
    """
    current = asyncio.current_task()
    requested = current.cancelling() if current is not None else 0
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    if current is not None and current.cancelling() > requested:
        raise asyncio.CancelledError
