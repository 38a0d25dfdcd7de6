"""Partition caps of CreateTopics and CreatePartitions: per request (Kafka's 10,000), per cluster
(`max.partitions`) and per broker (`max.broker.partitions`), checked before anything is placed."""

import time
import tracemalloc

from moldau.controller.operations import NewTopic, PartitionsIncrease
from moldau.controller.partition_limits import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS_PER_REQUEST,
)
from moldau.protocol.errors import ErrorCode

from .test_controller_core import codes, commit, make_core

E = ErrorCode
INT32_MAX = 2**31 - 1


def test_a_topic_of_int32_max_partitions_is_refused_at_once_without_allocating():
    core = make_core()
    tracemalloc.start()
    started = time.perf_counter()
    records, [result] = core.create_topics([NewTopic(name="huge", num_partitions=INT32_MAX)])
    took = time.perf_counter() - started
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert records == []
    assert (result.error_code, result.error_message) == (
        E.policy_violation,
        TOO_MANY_PARTITIONS_PER_REQUEST,
    )
    assert took < 0.5 and peak < 1_000_000


def test_the_request_cap_counts_every_topic_and_refuses_them_all_as_kafka_does():
    core = make_core(**{"num.partitions": "5000"})
    half = MAX_PARTITIONS_PER_REQUEST // 2
    records, results = core.create_topics(
        [
            NewTopic(name="a", num_partitions=half),
            NewTopic(name="b"),  # -1: num.partitions counts
            NewTopic(name="c", num_partitions=1),
        ]
    )
    assert records == [] and codes(results) == [E.policy_violation] * 3
    results = commit(
        core,
        core.create_topics(
            [NewTopic(name="a", num_partitions=half), NewTopic(name="b", num_partitions=0)]
        ),
    )
    assert codes(results) == [E.none, E.invalid_partitions]  # non-positive counts add nothing


def test_manual_assignments_count_toward_the_request_cap():
    core = make_core()
    assignments = {index: [1] for index in range(MAX_PARTITIONS_PER_REQUEST + 1)}
    records, [result] = core.create_topics([NewTopic(name="t", assignments=assignments)])
    assert records == [] and result.error_code == E.policy_violation


def test_create_partitions_to_int32_max_is_refused_at_once():
    core = make_core()
    commit(core, core.create_topics([NewTopic(name="t", num_partitions=1)]))
    started = time.perf_counter()
    records, [result] = core.create_partitions([PartitionsIncrease(name="t", count=INT32_MAX)])
    assert time.perf_counter() - started < 0.5
    assert records == []
    assert (result.error_code, result.error_message) == (
        E.policy_violation,
        TOO_MANY_PARTITIONS_PER_REQUEST,
    )
    assert len(core.image.topics["t"].partitions) == 1


def test_max_broker_partitions_counts_every_replica_a_broker_hosts():
    core = make_core(brokers=(1, 2), **{"max.broker.partitions": "10"})
    commit(core, core.create_topics([NewTopic(name="a", num_partitions=5, replication_factor=2)]))
    # each broker now hosts 5 replicas; 6 more of replication factor 2 put 11 on each
    [refused] = commit(
        core, core.create_topics([NewTopic(name="b", num_partitions=6, replication_factor=2)])
    )
    assert refused.error_code == E.policy_violation
    assert "max.broker.partitions=10" in (refused.error_message or "")
    assert "b" not in core.image.topics
    # topics of one request count together
    results = commit(
        core,
        core.create_topics(
            [
                NewTopic(name="c", num_partitions=6, replication_factor=1),  # 3 on each
                NewTopic(name="d", num_partitions=6, replication_factor=1),  # 6 on each: refused
            ]
        ),
    )
    assert codes(results) == [E.none, E.policy_violation]
    [grown] = commit(core, core.create_partitions([PartitionsIncrease(name="c", count=10)]))
    assert grown.error_code == E.none  # 2 more on each: 10
    [full] = commit(core, core.create_partitions([PartitionsIncrease(name="c", count=11)]))
    assert full.error_code == E.policy_violation


def test_max_partitions_caps_the_cluster():
    core = make_core(**{"max.partitions": "3"})
    assert codes(commit(core, core.create_topics([NewTopic(name="a", num_partitions=2)]))) == [
        E.none
    ]
    [refused] = commit(core, core.create_topics([NewTopic(name="b", num_partitions=2)]))
    assert refused.error_code == E.policy_violation
    assert "max.partitions=3" in (refused.error_message or "")
    [refused] = commit(core, core.create_partitions([PartitionsIncrease(name="a", count=4)]))
    assert refused.error_code == E.policy_violation
    [grown] = commit(core, core.create_partitions([PartitionsIncrease(name="a", count=3)]))
    assert grown.error_code == E.none


def test_validate_only_applies_the_caps_too():
    core = make_core(**{"max.broker.partitions": "2"})
    records, [result] = core.create_topics(
        [NewTopic(name="a", num_partitions=3)], validate_only=True
    )
    assert records == [] and result.error_code == E.policy_violation
