"""Replication throttles (KIP-73): which replicas a topic's `*.replication.throttled.replicas`
names, and the format those configs must have (the quotas' rates: tests/unit/test_rate.py)."""

import pytest

from moldau.config.values import ConfigError, validate_topic_configs
from moldau.replication.throttle import ReplicationThrottle
from moldau.types import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


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
