"""A value delivered later through a callback, with no task and no future.

Each asyncio future a result passes through costs a loop iteration before its callbacks run, and
on a busy broker one iteration is every request that arrived meanwhile. A `Deferred` calls its
callback in the same call that settles it, so an fsync's completion (acks=all Produce) or an append
(a Fetch parked until data arrives) reaches the socket as one call chain.

One consumer per Deferred: `then` takes a single pair of callbacks. The first `resolve` or `fail`
wins; later ones are ignored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

_PENDING, _RESOLVED, _FAILED = 0, 1, 2


class Deferred:
    __slots__ = ("_on_error", "_on_value", "_outcome", "_state")

    def __init__(self) -> None:
        self._state = _PENDING
        self._outcome: Any = None
        self._on_value: Callable[[Any], None] | None = None
        self._on_error: Callable[[BaseException], None] | None = None

    @property
    def resolved(self) -> bool:
        """True once settled, by a value or by an error."""
        return self._state != _PENDING

    def resolve(self, value: Any) -> None:
        if self._state != _PENDING:
            return
        self._state, self._outcome = _RESOLVED, value
        if self._on_value is not None:
            self._on_value(value)

    def fail(self, error: BaseException) -> None:
        if self._state != _PENDING:
            return
        self._state, self._outcome = _FAILED, error
        if self._on_error is not None:
            self._on_error(error)

    def then(
        self,
        on_value: Callable[[Any], None],
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Call `on_value(value)` or `on_error(error)` when settled (at once if it already is).

        Without `on_error`, a failure is delivered to nobody: pass one wherever a failure can
        happen."""
        self._on_value, self._on_error = on_value, on_error
        if self._state == _RESOLVED:
            on_value(self._outcome)
        elif self._state == _FAILED and on_error is not None:
            on_error(self._outcome)


def settled_by(future: asyncio.Future[Any], convert: Callable[[Any], Any]) -> Deferred:
    """A Deferred of `convert(value)` for the value `future` completes with (or its error): for a
    handler whose work is applied and whose answer waits on a future made elsewhere."""
    deferred = Deferred()

    def done(future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            deferred.fail(asyncio.CancelledError())
        elif (error := future.exception()) is not None:
            deferred.fail(error)
        else:
            try:
                value = convert(future.result())
            except Exception as failure:  # (a conversion that fails is the request's failure)
                deferred.fail(failure)
                return
            deferred.resolve(value)

    future.add_done_callback(done)
    return deferred
