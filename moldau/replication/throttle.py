"""Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager applies them.

Two quotas per broker, in bytes/s, from the broker configs `leader.replication.throttled.rate`
(what this broker sends its followers) and `follower.replication.throttled.rate` (what it
fetches as a follower). A quota covers only the replicas a topic names: the leader side those in
`leader.replication.throttled.replicas` with this broker's id, the follower side those in
`follower.replication.throttled.replicas` with this broker's id (`partition:broker,...`, or `*`
for every replica of the topic). Only replicas out of the ISR are held back, so a throttle never
stalls acks=all: a leader answers an out-of-sync follower no records while the quota is
exceeded, and such a follower leaves the partition out of its fetches; the bytes of every
throttled replica count.

The rate is Kafka's (`moldau.rate.RateQuota` over a `SampledRate`): bytes over `samples` windows of `window_s`
seconds, divided by the time the windows span, at least `(samples - 1) * window_s` (so a fresh
quota lets that many seconds' worth through at once). Pure: the clock is passed in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from moldau.config.values import ConfigError, parse_throttled_replicas
from moldau.rate import RateQuota
from moldau.types import TopicPartition

SAMPLES = 11  # replication.quota.window.num (a broker property, as the next)
WINDOW_S = 1.0  # replication.quota.window.size.seconds

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class ReplicationThrottle:
    """Both quotas of one broker and which replicas they cover (the topics' configs, read from
    the current metadata through `topic_config(topic, name)`)."""

    def __init__(
        self,
        *,
        node_id: int,
        leader_rate: Callable[[], int],
        follower_rate: Callable[[], int],
        topic_config: Callable[[str, str], str | None],
        now: Callable[[], float],
        samples: int = SAMPLES,
        window_s: float = WINDOW_S,
    ) -> None:
        self.node_id = node_id
        self.leader = RateQuota(leader_rate, now=now, samples=samples, window_s=window_s)
        self.follower = RateQuota(follower_rate, now=now, samples=samples, window_s=window_s)
        self._topic_config = topic_config

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """This broker's leader replica of `tp` is throttled towards its followers."""
        return self._listed(tp, LEADER_REPLICAS)

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """This broker's follower replica of `tp` is throttled."""
        return self._listed(tp, FOLLOWER_REPLICAS)

    def _listed(self, tp: TopicPartition, name: str) -> bool:
        value = self._topic_config(tp.topic, name)
        if not value:
            return False
        replicas = _parse(name, value)
        if replicas is _UNREADABLE:
            return False
        return replicas is None or (tp.partition, self.node_id) in replicas


_UNREADABLE: frozenset[tuple[int, int]] = frozenset({(-1, -1)})


@functools.lru_cache(maxsize=1024)
def _parse(name: str, value: str) -> frozenset[tuple[int, int]] | None:
    items = [item.strip() for item in value.split(",") if item.strip()]
    try:
        return parse_throttled_replicas(name, items)
    except ConfigError:
        return _UNREADABLE  # (validated when set: only a hand-made log holds such a value)
