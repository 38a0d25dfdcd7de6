"""Requests served and the time each took, per Kafka API (Kafka's RequestMetrics
`RequestsPerSec` and `TotalTimeMs`), in plain integers the dispatcher adds to on every request.

The time is from the dispatcher taking a decoded request to its answer being encoded (for an
answer that waits: acks=all replication, a parked fetch, a group's join, until it is ready).
Kafka's TotalTimeMs also counts the time a request queued before a handler took it and the
time its answer took to send; here those stay in the connection.
"""

from __future__ import annotations

import time
from bisect import bisect_left

from moldau.protocol.api_keys import ApiKey

__all__ = ["BUCKET_BOUNDS_MS", "RequestMetrics", "api_name"]

# Upper bounds of the latency histogram's buckets, in ms (+Inf after the last).
BUCKET_BOUNDS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BOUNDS_S = tuple(bound / 1000 for bound in BUCKET_BOUNDS_MS)
_KEYS = max(ApiKey) + 1
_now = time.perf_counter


def api_name(api_key: int) -> str:
    """Kafka's name of an API (`ApiKeys.name`): PRODUCE -> Produce, API_VERSIONS -> ApiVersions."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(word.capitalize() for word in name.split("_"))


class RequestMetrics:
    """Per API key: requests taken, and a histogram of their times (bucket counts, not yet
    cumulative, and the sum in seconds)."""

    __slots__ = ("buckets", "requests", "seconds")

    def __init__(self) -> None:
        self.requests = [0] * _KEYS
        self.buckets = [[0] * (len(_BOUNDS_S) + 1) for _ in range(_KEYS)]
        self.seconds = [0.0] * _KEYS

    def taken(self, api_key: int) -> float:
        """Count a request the dispatcher takes; its start, for `answered`."""
        self.requests[api_key] += 1
        return _now()

    def answered(self, api_key: int, started: float) -> None:
        elapsed = _now() - started
        self.buckets[api_key][bisect_left(_BOUNDS_S, elapsed)] += 1
        self.seconds[api_key] += elapsed
