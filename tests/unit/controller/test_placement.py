"""Replica placement: striped over racks and active brokers (Kafka's StripedReplicaPlacer)."""

import uuid
from collections import Counter

import pytest

from moldau.controller.operations import NewTopic, PartitionsIncrease
from moldau.controller.placement import internal_topic_replication, place_replicas
from moldau.metadata.image import BrokerImage
from moldau.metadata.records import BrokerRegistrationChangeRecord, FenceBrokerRecord
from moldau.protocol.errors import ErrorCode, KafkaError

from .test_controller_core import commit, make_core


def brokers(racks):
    """{broker id: rack} -> broker images."""
    return [
        BrokerImage(
            broker_id=broker_id,
            incarnation_id=uuid.UUID(int=broker_id),
            broker_epoch=1,
            endpoints=(),
            rack=rack,
            fenced=False,
        )
        for broker_id, rack in racks.items()
    ]


def test_without_racks_placement_is_round_robin_from_the_start():
    assignments = place_replicas(
        brokers({1: None, 2: None, 3: None}), num_partitions=4, replication_factor=2, start=1
    )
    assert assignments == [[2, 3], [3, 1], [1, 2], [2, 3]]


def test_every_partition_spans_as_many_racks_as_it_can():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assignments = place_replicas(brokers(racks), num_partitions=12, replication_factor=3, start=0)
    for replicas in assignments:
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    assert Counter(replicas[0] for replicas in assignments) == {b: 2 for b in racks}
    assert Counter(b for replicas in assignments for b in replicas) == {b: 6 for b in racks}


def test_a_replication_factor_above_the_racks_doubles_up_evenly():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assignments = place_replicas(brokers(racks), num_partitions=8, replication_factor=3, start=0)
    for replicas in assignments:
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}
    assert Counter(replicas[0] for replicas in assignments) == {b: 2 for b in racks}
    assert Counter(b for replicas in assignments for b in replicas) == {b: 6 for b in racks}


def test_brokers_without_a_rack_form_a_rack_of_their_own():
    racks = {1: None, 2: "a", 3: "a"}
    assignments = place_replicas(brokers(racks), num_partitions=4, replication_factor=2, start=0)
    assert all(1 in replicas for replicas in assignments)


def test_too_few_brokers_or_a_non_positive_factor_is_invalid_replication_factor():
    for factor in (0, 4):
        with pytest.raises(KafkaError) as caught:
            place_replicas(
                brokers({1: None, 2: None, 3: None}),
                num_partitions=1,
                replication_factor=factor,
                start=0,
            )
        assert caught.value.code == ErrorCode.invalid_replication_factor


def test_created_topics_spread_leaders_across_topics_and_skip_brokers_that_may_not_lead():
    core = make_core(brokers=(1, 2, 3, 4))
    commit(core, core.create_topics([NewTopic(name=f"t{i}", num_partitions=1) for i in range(4)]))
    leaders = {core.image.topics[f"t{i}"].partitions[0].leader for i in range(4)}
    assert leaders == {1, 2, 3, 4}
    epoch = core.image.brokers[4].broker_epoch
    commit(core, ([FenceBrokerRecord(broker_id=4, broker_epoch=epoch)], None))
    epoch = core.image.brokers[3].broker_epoch
    commit(
        core,
        (
            [
                BrokerRegistrationChangeRecord(
                    broker_id=3, broker_epoch=epoch, in_controlled_shutdown=True
                )
            ],
            None,
        ),
    )
    [result] = commit(
        core, core.create_topics([NewTopic(name="rf2", num_partitions=4, replication_factor=2)])
    )
    assert result.error_code == ErrorCode.none
    for partition in core.image.topics["rf2"].partitions.values():
        assert set(partition.replicas) == {1, 2} and partition.isr == partition.replicas
    [result] = commit(core, core.create_topics([NewTopic(name="rf3", replication_factor=3)]))
    assert result.error_code == ErrorCode.invalid_replication_factor
    assert "only 2 broker(s)" in result.error_message
    [result] = commit(core, core.create_partitions([PartitionsIncrease(name="rf2", count=6)]))
    assert result.error_code == ErrorCode.none
    assert {p.leader for p in core.image.topics["rf2"].partitions.values()} == {1, 2}


def test_a_manual_assignment_puts_only_active_replicas_in_the_isr():
    core = make_core(brokers=(1, 2, 3))
    epoch = core.image.brokers[1].broker_epoch
    commit(core, ([FenceBrokerRecord(broker_id=1, broker_epoch=epoch)], None))
    results = commit(
        core,
        core.create_topics(
            [
                NewTopic(name="ok", assignments={0: [1, 2, 3]}),
                NewTopic(name="all-fenced", assignments={0: [1]}),
            ]
        ),
    )
    assert [r.error_code for r in results] == [
        ErrorCode.none,
        ErrorCode.invalid_replica_assignment,
    ]
    assert "fenced or in controlled shutdown" in results[1].error_message
    partition = core.image.topics["ok"].partitions[0]
    assert (partition.replicas, partition.isr, partition.leader) == ((1, 2, 3), (2, 3), 2)


def test_internal_topics_are_capped_to_the_brokers_there_are_with_min_isr_two_from_three():
    assert internal_topic_replication(3, 1) == (1, {})
    assert internal_topic_replication(3, 2) == (2, {})
    assert internal_topic_replication(3, 5) == (3, {"min.insync.replicas": "2"})
    assert internal_topic_replication(1, 5) == (1, {})
    assert internal_topic_replication(3, 0) == (1, {})
