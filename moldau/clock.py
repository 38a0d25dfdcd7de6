"""Time as an interface, so cores can be driven by a manual clock in tests.

Two clocks, never mixed: the wall clock (`now_ms`) for what Kafka defines on wall time (record
timestamps, retention.ms against them, transaction and offset expiry); the monotonic clock for
every timeout a protocol measures (sessions, replica lag, elections), which a wall-clock step
(NTP, an operator) must not fire early or hold off.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock milliseconds (for timestamps) and monotonic seconds (for timeouts)."""

    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to: `advance(ms)`."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._monotonic = 1000.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        self._now_ms += ms
        self._monotonic += ms / 1000.0

    def jump_wall(self, ms: int) -> None:
        """The wall clock stepped forward (or back, `ms` < 0); monotonic time does not move."""
        self._now_ms += ms


def monotonic_ms(clock: Clock) -> int:
    """The clock's monotonic time in whole milliseconds, for deadlines kept as integers."""
    return int(clock.monotonic() * 1000)


SYSTEM_CLOCK = SystemClock()
