"""Replication throttles (KIP-73): the quota's rate over its windows, which replicas a topic's
`*.replication.throttled.replicas` names, and the format those configs must have."""

import pytest

from moldau.config.definitions import LONG_MAX
from moldau.config.values import ConfigError, validate_topic_configs
from moldau.replication.throttle import ReplicationQuota, ReplicationThrottle
from moldau.types import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_spans_at_least_all_but_one_window_then_the_windows_recorded():
    clock = Clock()
    quota = ReplicationQuota(lambda: 1000, now=clock, samples=11, window_s=1.0)
    quota.record(9_000)
    assert quota.rate() == 900.0  # 9000 bytes over the 10 s minimum span
    assert not quota.exceeded()
    quota.record(2_000)
    assert quota.exceeded()
    clock.now += 5.5  # 5 whole windows since the first began: 5 more counted (Kafka's Rate)
    assert quota.rate() == pytest.approx(11_000 / 10.5)
    clock.now += 20  # every window expired
    assert quota.rate() == 0.0 and not quota.exceeded()


def test_a_quota_at_the_default_rate_is_never_exceeded():
    clock = Clock()
    quota = ReplicationQuota(lambda: LONG_MAX, now=clock)
    quota.record(10**15)
    assert not quota.exceeded()


def test_the_limit_is_read_when_asked():
    clock = Clock()
    limit = [10**9]
    quota = ReplicationQuota(lambda: limit[0], now=clock, samples=2, window_s=1.0)
    quota.record(5_000)
    assert not quota.exceeded()
    limit[0] = 1_000
    assert quota.exceeded()


def throttle(configs):
    return ReplicationThrottle(
        node_id=2,
        leader_rate=lambda: 1,
        follower_rate=lambda: 1,
        topic_config=lambda topic, name: configs.get((topic, name)),
        now=Clock(),
    )


def test_a_topic_names_the_replicas_a_broker_throttles():
    subject = throttle(
        {
            ("t", "leader.replication.throttled.replicas"): "0:1,0:2,1:3",
            ("t", "follower.replication.throttled.replicas"): "1:2",
            ("all", "leader.replication.throttled.replicas"): "*",
        }
    )
    assert subject.leader_throttled(TopicPartition("t", 0))
    assert not subject.leader_throttled(TopicPartition("t", 1))  # (broker 3's, not ours)
    assert subject.follower_throttled(TopicPartition("t", 1))
    assert not subject.follower_throttled(TopicPartition("t", 0))
    assert subject.leader_throttled(TopicPartition("all", 7))
    assert not subject.follower_throttled(TopicPartition("all", 7))
    assert not subject.leader_throttled(TopicPartition("other", 0))


@pytest.mark.parametrize("value", ["*", "0:1", "0:1, 1:2", ""])
def test_throttled_replicas_are_a_wildcard_or_partition_broker_pairs(value):
    validate_topic_configs({"leader.replication.throttled.replicas": value})
    validate_topic_configs({"follower.replication.throttled.replicas": value})


@pytest.mark.parametrize("value", ["all", "0", "0:x", "*,0:1", "1:2:3"])
def test_anything_else_is_refused(value):
    with pytest.raises(ConfigError, match="partition:broker"):
        validate_topic_configs({"leader.replication.throttled.replicas": value})
