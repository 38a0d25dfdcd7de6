"""Deferred: a value or an error delivered by callback, once, whenever `then` is called."""

from __future__ import annotations

from typing import Any

from moldau.net.deferred import Deferred


def _listen(deferred: Deferred) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []
    deferred.then(lambda value: seen.append(("value", value)), lambda e: seen.append(("error", e)))
    return seen


def test_a_value_reaches_a_callback_set_before_or_after_it() -> None:
    before = Deferred()
    seen = _listen(before)
    assert seen == [] and not before.resolved
    before.resolve(1)
    assert seen == [("value", 1)] and before.resolved

    after = Deferred()
    after.resolve(2)
    assert _listen(after) == [("value", 2)]


def test_the_first_outcome_wins() -> None:
    deferred = Deferred()
    seen = _listen(deferred)
    failure = RuntimeError("late")
    deferred.resolve("first")
    deferred.resolve("second")
    deferred.fail(failure)
    assert seen == [("value", "first")]

    failed = Deferred()
    failed.fail(failure)
    failed.resolve("ignored")
    assert _listen(failed) == [("error", failure)]
