"""`LagHistory`: each consumer group's total lag over time, for the group page's chart.

A sample is taken whenever the console computes a group's lag (the group page asks every few
seconds while it is open), at most one per `min_interval_s`; the history keeps the last
`max_samples` per group and the `max_groups` groups looked at most recently, in memory only
(a restarted console starts a new history).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["LagHistory", "LagSample"]

DEFAULT_MAX_SAMPLES: Final = 1_800  # an hour at one sample every two seconds
DEFAULT_MAX_GROUPS: Final = 200


@dataclass(frozen=True, slots=True)
class LagSample:
    time_s: float  # seconds since the epoch
    total_lag: int


class LagHistory:
    def __init__(
        self,
        *,
        clock: Callable[[], float],
        min_interval_s: float = 1.0,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        max_groups: int = DEFAULT_MAX_GROUPS,
    ) -> None:
        self._clock = clock
        self._min_interval_s = min_interval_s
        self._max_samples = max_samples
        self._max_groups = max_groups
        self._groups: OrderedDict[str, deque[LagSample]] = OrderedDict()

    def record(self, group_id: str, total_lag: int) -> list[LagSample]:
        """Add a sample (unless the last is too recent) and return the group's history."""
        now = self._clock()
        samples = self._groups.get(group_id)
        if samples is None:
            samples = self._groups[group_id] = deque(maxlen=self._max_samples)
            while len(self._groups) > self._max_groups:
                self._groups.popitem(last=False)
        self._groups.move_to_end(group_id)
        if not samples or now - samples[-1].time_s >= self._min_interval_s:
            samples.append(LagSample(now, total_lag))
        return list(samples)

    def samples(self, group_id: str) -> list[LagSample]:
        return list(self._groups.get(group_id, ()))
