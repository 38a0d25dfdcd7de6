"""AlterPartition (KIP-497): a leader's ISR changes, checked in Kafka's order."""

import uuid

import pytest

from moldau.controller.operations import IsrMember, IsrProposal, NewTopic
from moldau.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError

from .test_controller_core import commit, make_core
from .test_leadership import enable_unclean_election

E = ErrorCode


def cluster(**config):
    core = make_core(brokers=(1, 2, 3, 4), **config)
    commit(core, core.create_topics([NewTopic(name="t", assignments={0: [1, 2, 3], 1: [2, 3, 4]})]))
    return core


def topic_id(core):
    return core.image.topics["t"].topic_id


def partition(core, index=0):
    return core.image.topics["t"].partitions[index]


def proposal(core, isr, *, index=0, leader_epoch=None, partition_epoch=None, epochs=None, **kw):
    current = partition(core, index)
    return IsrProposal(
        topic_id=topic_id(core),
        partition=index,
        leader_epoch=current.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=current.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=[IsrMember(broker_id=b, broker_epoch=(epochs or {}).get(b, -1)) for b in isr],
        **kw,
    )


def alter(core, *changes, broker_id=1, broker_epoch=None):
    epoch = core.image.brokers[broker_id].broker_epoch if broker_epoch is None else broker_epoch
    return commit(
        core, core.alter_partition(broker_id=broker_id, broker_epoch=epoch, changes=changes)
    )


def error(core, change, **kw):
    records, [result] = core.alter_partition(
        broker_id=kw.get("broker_id", 1),
        broker_epoch=core.image.brokers[kw.get("broker_id", 1)].broker_epoch,
        changes=[change],
    )
    assert records == []
    return result.error_code


def test_a_shrink_then_an_expansion_answer_the_committed_state():
    core = cluster()
    [result] = alter(core, proposal(core, [1, 3]))
    assert result.error_code == E.none
    assert (result.leader_id, result.isr, result.leader_epoch, result.partition_epoch) == (
        1,
        (1, 3),
        0,
        1,
    )
    assert partition(core).isr == (1, 3) and partition(core).partition_epoch == 1
    [result] = alter(core, proposal(core, [1, 3, 2]))
    assert (result.isr, result.partition_epoch, result.leader_epoch) == ((1, 3, 2), 2, 0)


def test_the_isr_may_shrink_to_the_leader_alone_whatever_min_insync_replicas_says():
    core = cluster(**{"min.insync.replicas": "2"})
    [result] = alter(core, proposal(core, [1]))
    assert result.error_code == E.none and result.isr == (1,)


def test_an_unchanged_isr_answers_the_current_state_without_records():
    core = cluster()
    records, [result] = core.alter_partition(
        broker_id=1,
        broker_epoch=core.image.brokers[1].broker_epoch,
        changes=[proposal(core, [1, 2, 3])],
    )
    assert records == [] and result.isr == (1, 2, 3) and result.partition_epoch == 0


def test_a_stale_or_unknown_broker_epoch_refuses_the_whole_request():
    core = cluster()
    for broker_id, epoch in ((1, 12345), (9, 1)):
        with pytest.raises(KafkaError) as caught:
            core.alter_partition(broker_id=broker_id, broker_epoch=epoch, changes=[])
        assert caught.value.code == E.stale_broker_epoch


def test_epochs_are_checked_in_kafkas_order():
    core = cluster()
    alter(core, proposal(core, [1, 3]))  # partition epoch 1
    assert error(core, proposal(core, [1], leader_epoch=1)) == E.not_controller
    assert error(core, proposal(core, [1], partition_epoch=2)) == E.not_controller
    assert error(core, proposal(core, [1], partition_epoch=0)) == E.invalid_update_version
    assert error(core, proposal(core, [2, 3], index=0), broker_id=2) == E.invalid_request
    moved = PartitionChangeRecord(topic_id=topic_id(core), partition=0, leader=3)
    commit(core, ([moved], None))
    stale_leader = proposal(core, [1, 3], leader_epoch=0, partition_epoch=2)
    assert error(core, stale_leader) == E.fenced_leader_epoch


def test_an_isr_must_be_distinct_replicas_and_hold_the_leader():
    core = cluster()
    assert error(core, proposal(core, [1, 1])) == E.invalid_request
    assert error(core, proposal(core, [1, 4])) == E.invalid_request  # 4 is no replica
    assert error(core, proposal(core, [2, 3])) == E.invalid_request
    assert error(core, proposal(core, [])) == E.invalid_request


def test_fenced_shutting_down_or_reregistered_members_are_ineligible():
    core = cluster()
    alter(core, proposal(core, [1]))
    epoch_two = core.image.brokers[2].broker_epoch
    assert error(core, proposal(core, [1, 2], epochs={2: epoch_two + 1})) == E.ineligible_replica
    commit(
        core,
        (
            [
                BrokerRegistrationChangeRecord(
                    broker_id=2, broker_epoch=epoch_two, in_controlled_shutdown=True
                ),
                FenceBrokerRecord(broker_id=3, broker_epoch=core.image.brokers[3].broker_epoch),
            ],
            None,
        ),
    )
    _records, [shutting_down] = core.alter_partition(
        broker_id=1,
        broker_epoch=core.image.brokers[1].broker_epoch,
        changes=[proposal(core, [1, 2])],
    )
    assert shutting_down.error_code == E.ineligible_replica
    assert "2 (shutting down)" in shutting_down.error_message
    assert error(core, proposal(core, [1, 3])) == E.ineligible_replica


def test_unknown_topics_and_partitions_fail_alone():
    core = cluster()
    ghost_topic = IsrProposal(
        topic_id=uuid.UUID(int=999), partition=0, leader_epoch=0, partition_epoch=0, new_isr=[]
    )
    _records, results = core.alter_partition(
        broker_id=1,
        broker_epoch=core.image.brokers[1].broker_epoch,
        changes=[ghost_topic, proposal(core, [1, 2])],
    )
    assert [r.error_code for r in results] == [E.unknown_topic_id, E.none]
    ghost_partition = IsrProposal(
        topic_id=topic_id(core), partition=7, leader_epoch=0, partition_epoch=0, new_isr=[]
    )
    assert error(core, ghost_partition) == E.unknown_topic_or_partition


def test_a_second_change_of_one_partition_in_a_request_sees_the_first():
    core = cluster()
    first = proposal(core, [1, 2])
    again = proposal(core, [1])
    results = alter(core, first, again)
    assert [r.error_code for r in results] == [E.none, E.invalid_update_version]
    assert partition(core).isr == (1, 2)


def test_a_recovering_leader_keeps_the_isr_to_itself_until_it_reports_recovered():
    core = cluster()
    enable_unclean_election(core)
    recovering = PartitionChangeRecord(
        topic_id=topic_id(core), partition=0, leader=1, isr=(1,), leader_recovery_state=1
    )
    commit(core, ([recovering], None))
    assert error(core, proposal(core, [1, 2], leader_recovery_state=1)) == E.invalid_request
    [result] = alter(core, proposal(core, [1], leader_recovery_state=0))
    assert result.error_code == E.none and result.leader_recovery_state == 0
    assert partition(core).leader_recovery_state == 0
    assert error(core, proposal(core, [1], leader_recovery_state=1)) == E.invalid_request
