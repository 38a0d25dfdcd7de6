"""Which replica a partition is read from (KIP-392): its leader, or the replica the leader named
as `preferred_read_replica` in a Fetch answer to a client that sent its `client.rack`.

As Kafka's consumer: the preferred replica is used until `metadata.max.age.ms` passes or a fetch
from it fails (then the leader is asked again, and may name it again); a leader names one only
when the broker runs a rack-aware `replica.selector.class`. A fetch that is redirected brings no
records, so a redirect costs one round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable

from moldau.types import TopicPartition

__all__ = ["ReadReplicas"]


class ReadReplicas:
    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_age_s = max_age_s
        self._clock = clock
        self._preferred: dict[TopicPartition, tuple[int, float]] = {}

    def node_for(self, tp: TopicPartition, leader: int, brokers: Container[int]) -> int:
        """The node to fetch `tp` from, given its current leader and the brokers the client's
        metadata knows (a preferred replica it does not know is dropped, as Kafka's is)."""
        preferred = self._preferred.get(tp)
        if preferred is None:
            return leader
        node, expires = preferred
        if self._clock() >= expires or node not in brokers:
            del self._preferred[tp]
            return leader
        return node

    def answered(self, tp: TopicPartition, node: int, preferred_read_replica: int) -> None:
        """A Fetch answer from `node` for `tp` named `preferred_read_replica` (-1: none)."""
        if preferred_read_replica >= 0 and preferred_read_replica != node:
            self._preferred[tp] = (preferred_read_replica, self._clock() + self._max_age_s)

    def failed(self, tps: Iterable[TopicPartition]) -> None:
        """Fetching these failed: read them from their leader again."""
        for tp in tps:
            self._preferred.pop(tp, None)

    def preferred(self, tp: TopicPartition) -> int | None:
        """The replica `tp` is read from instead of its leader, if any (for tests and logs)."""
        preferred = self._preferred.get(tp)
        return None if preferred is None else preferred[0]
