"""Kafka's windowed rate, as its quotas measure it (`Rate` over a `SampledStat` of
org.apache.kafka.common.metrics): client quotas (`moldau.broker.quotas`), replication
throttles (`moldau.replication.throttle`) and the log-dir move throttle
(`moldau.storage.log_mover`).

`samples` windows of `window_ms` each, kept in a ring. A window starts with the first value
recorded after the previous one ended (not on a fixed grid), and one older than all the windows
together is emptied before a measurement. The rate is the windows' sum over the time since the
oldest window started, counted as at least `samples - 1` whole windows: a new sensor lets
`(samples - 1) * window_ms` worth of its quota through at once. Pure: time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable

# A limit this high is no limit (Kafka's Long.MAX_VALUE default of its byte-rate throttles).
UNLIMITED = 2**63 - 1


class SampledRate:
    """Values per second over `samples` windows of `window_ms` milliseconds."""

    __slots__ = ("_current", "_samples", "_starts", "_values", "_window_ms")

    def __init__(self, *, samples: int, window_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one window of at least 1 ms")
        self._samples = samples
        self._window_ms = window_ms
        self._starts: list[int] = []  # when each window began (ms)
        self._values: list[float] = []  # what was recorded in it
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        starts, values = self._starts, self._values
        if not starts:
            starts.append(now_ms)
            values.append(0.0)
        current = self._current
        if now_ms - starts[current] >= self._window_ms:  # the window is complete: the next
            current = (current + 1) % self._samples
            self._current = current
            if current == len(starts):
                starts.append(now_ms)
                values.append(0.0)
            else:
                starts[current] = now_ms
                values[current] = 0.0
        values[current] += value

    def measure(self, now_ms: int) -> float:
        """The rate, per second."""
        return self.measure_over(now_ms)[0]

    def window_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's `Rate.windowSize`): since the oldest
        window began, but at least `samples - 1` whole windows and at least 1 ms."""
        return self.measure_over(now_ms)[1]

    def measure_over(self, now_ms: int) -> tuple[float, int]:
        """The rate per second and the time it is measured over, in one pass."""
        starts = self._starts
        if not starts:
            return 0.0, max((self._samples - 1) * self._window_ms, 1)
        oldest = min(starts)
        if now_ms - oldest >= self._samples * self._window_ms:
            self._purge(now_ms)
            oldest = min(starts)
        elapsed = now_ms - oldest
        full_windows = elapsed // self._window_ms
        if full_windows < self._samples - 1:
            elapsed += (self._samples - 1 - full_windows) * self._window_ms
        window_ms = max(elapsed, 1)
        return sum(self._values) * 1000.0 / window_ms, window_ms

    def _purge(self, now_ms: int) -> None:
        """Empty the windows that began `samples` windows ago or more; they start again now."""
        expire_ms = self._samples * self._window_ms
        starts = self._starts
        for index, start in enumerate(starts):
            if now_ms - start >= expire_ms:
                starts[index] = now_ms
                self._values[index] = 0.0


def kafka_round(value: float) -> int:
    """Java's Math.round (halves up), which Kafka's throttle times use."""
    return math.floor(value + 0.5)


class RateQuota:
    """Bytes per second over a `SampledRate`, against a limit read when asked (a dynamic
    config: a change applies at once). `now` is in seconds."""

    __slots__ = ("_limit", "_now", "_rate")

    def __init__(
        self, limit: Callable[[], int], *, now: Callable[[], float], samples: int, window_s: float
    ) -> None:
        self._limit = limit
        self._now = now
        self._rate = SampledRate(samples=samples, window_ms=max(round(window_s * 1000), 1))

    def record(self, size: int) -> None:
        self._rate.record(size, self._now_ms())

    def rate(self) -> float:
        return self._rate.measure(self._now_ms())

    def exceeded(self) -> bool:
        limit = self._limit()
        return limit < UNLIMITED and self.rate() > limit

    def delay_s(self) -> float:
        """How long the rate takes to come back to the limit, 0 when it is not over it: the
        excess as a share of the limit times the time measured over (Kafka's throttle time)."""
        limit = self._limit()
        if limit >= UNLIMITED:
            return 0.0
        rate, window_ms = self._rate.measure_over(self._now_ms())
        if rate <= limit:
            return 0.0
        if limit <= 0:
            return window_ms / 1000.0  # (a limit of 0: nothing passes; look again later)
        return (rate - limit) / limit * window_ms / 1000.0

    def _now_ms(self) -> int:
        return int(self._now() * 1000)
