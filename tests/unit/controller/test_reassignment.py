"""Partition reassignments (KIP-455): started, completed by the AlterPartition that takes the last
adding replica into the ISR, cancelled, and left alone by the leader rebalance."""

from moldau.controller import partition_control
from moldau.controller.operations import NewTopic, PartitionReassignment, PartitionsIncrease
from moldau.metadata.records import FenceBrokerRecord, UnfenceBrokerRecord
from moldau.protocol.errors import ErrorCode

from .test_alter_partition import alter, cluster, partition, proposal
from .test_controller_core import commit, make_core

E = ErrorCode


def reassign(core, replicas, *, index=0, topic="t", **options):
    [result] = commit(
        core,
        core.alter_partition_reassignments(
            [PartitionReassignment(topic=topic, partition=index, replicas=replicas)], **options
        ),
    )
    return result.error_code, result.error_message


def state(core, index=0):
    p = partition(core, index)
    return p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas


def fence(core, broker_id):
    epoch = core.image.brokers[broker_id].broker_epoch
    records = [FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch)]
    records += partition_control.broker_leaves(core.image, core.config, broker_id)
    commit(core, (records, None))


def unfence(core, broker_id):
    epoch = core.image.brokers[broker_id].broker_epoch
    commit(core, ([UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch)], None))


def test_a_reassignment_adds_the_new_replicas_first_and_keeps_the_isr_and_leader():
    core = cluster()
    before = partition(core)

    assert reassign(core, [2, 3, 4]) == (E.none, None)

    assert state(core) == ((2, 3, 4, 1), (1, 2, 3), 1, (4,), (1,))
    after = partition(core)
    assert after.leader_epoch == before.leader_epoch
    assert after.partition_epoch == before.partition_epoch + 1


def test_the_last_adding_replica_joining_the_isr_completes_it_and_moves_a_removed_leader():
    core = cluster()
    reassign(core, [2, 3, 4])
    epoch = partition(core).leader_epoch

    [result] = alter(core, proposal(core, [1, 2, 3, 4]))

    assert state(core) == ((2, 3, 4), (2, 3, 4), 2, (), ())
    assert partition(core).leader_epoch == epoch + 1
    assert result.error_code == E.new_leader_elected  # the sender no longer leads


def test_a_leader_that_stays_keeps_leading_and_is_answered_the_new_isr():
    core = cluster()
    reassign(core, [1, 2, 4])

    [result] = alter(core, proposal(core, [1, 2, 3, 4]))

    assert state(core) == ((1, 2, 4), (1, 2, 4), 1, (), ())
    assert (result.error_code, result.isr, result.leader_id) == (E.none, (1, 2, 4), 1)


def test_it_completes_only_once_every_target_replica_is_in_the_isr():
    core = make_six()
    reassign(core, [4, 5, 6])

    alter(core, proposal(core, [1, 2, 3, 4]))
    assert state(core) == ((4, 5, 6, 1, 2, 3), (1, 2, 3, 4), 1, (4, 5, 6), (1, 2, 3))
    alter(core, proposal(core, [1, 2, 3, 4, 5, 6]))

    assert state(core) == ((4, 5, 6), (4, 5, 6), 4, (), ())


def make_six():
    core = make_core(brokers=(1, 2, 3, 4, 5, 6))
    commit(core, core.create_topics([NewTopic(name="t", assignments={0: [1, 2, 3]})]))
    return core


def test_a_target_without_new_replicas_completes_at_once():
    core = cluster()
    assert reassign(core, [3, 2, 1]) == (E.none, None)
    assert state(core) == ((3, 2, 1), (1, 2, 3), 1, (), ())

    assert reassign(core, [3, 2]) == (E.none, None)  # 1 leaves: the first target replica leads
    assert state(core) == ((3, 2), (2, 3), 3, (), ())


def test_the_current_replicas_as_target_change_nothing():
    core = cluster()
    records, [result] = core.alter_partition_reassignments(
        [PartitionReassignment(topic="t", partition=0, replicas=[1, 2, 3])]
    )
    assert records == [] and result.error_code == E.none


def test_cancelling_reverts_to_the_original_replicas_and_leaves_the_added_ones_out():
    core = make_six()
    reassign(core, [4, 5, 6])
    alter(core, proposal(core, [1, 2, 3, 4]))

    assert reassign(core, None) == (E.none, None)

    assert state(core) == ((1, 2, 3), (1, 2, 3), 1, (), ())
    assert reassign(core, None) == (
        E.no_reassignment_in_progress,
        "No partition reassignment is in progress.",
    )


def test_a_new_target_replaces_the_one_in_progress():
    core = make_six()
    reassign(core, [4, 5, 6])
    alter(core, proposal(core, [1, 2, 3, 4]))

    reassign(core, [1, 2, 5])

    # (5 is a replica already, so not adding: Kafka lists it so too)
    assert state(core) == ((1, 2, 5, 3, 4, 6), (1, 2, 3, 4), 1, (), (3, 4, 6))
    alter(core, proposal(core, [1, 2, 3, 4, 5]))
    assert state(core) == ((1, 2, 5), (1, 2, 5), 1, (), ())


def test_a_fenced_target_replica_holds_it_until_unfenced():
    core = cluster()
    reassign(core, [2, 3, 4])
    fence(core, 4)

    # 4 cannot join while fenced (INELIGIBLE_REPLICA): the reassignment waits.
    records, [result] = core.alter_partition(
        broker_id=1,
        broker_epoch=core.image.brokers[1].broker_epoch,
        changes=[proposal(core, [1, 2, 3, 4])],
    )
    assert records == [] and result.error_code == E.ineligible_replica
    assert partition(core).is_reassigning

    unfence(core, 4)
    alter(core, proposal(core, [1, 2, 3, 4]))
    assert state(core) == ((2, 3, 4), (2, 3, 4), 2, (), ())


def test_a_fenced_leader_mid_reassignment_neither_wedges_it_nor_blocks_a_cancel():
    # (a removing replica fenced is no target replica: the reassignment completes without it)
    core = cluster()
    reassign(core, [2, 3, 4])
    fence(core, 1)  # the leader, leaving: 2 leads on
    assert state(core) == ((2, 3, 4, 1), (2, 3), 2, (4,), (1,))

    alter(core, proposal(core, [2, 3, 4]), broker_id=2)
    assert state(core) == ((2, 3, 4), (2, 3, 4), 2, (), ())

    core = cluster()
    reassign(core, [2, 3, 4])
    fence(core, 1)
    assert reassign(core, None) == (E.none, None)
    assert state(core) == ((2, 3, 1), (2, 3), 2, (), ())


def test_a_cancel_that_would_need_an_unclean_election_is_refused():
    core = make_six()
    reassign(core, [4, 5, 6])
    alter(core, proposal(core, [1, 2, 3, 4]))
    for broker_id in (2, 3, 1):
        fence(core, broker_id)  # 1 led: 4 takes over, the last original member leaves
    assert state(core)[1:3] == ((4,), 4)

    assert reassign(core, None) == (
        E.invalid_replica_assignment,
        "Unable to revert partition assignment for t:0 because it would require an unclean "
        "leader election.",
    )


def test_the_leader_rebalance_leaves_partitions_under_reassignment_alone():
    core = cluster(**{"leader.imbalance.per.broker.percentage": "0"})
    reassign(core, [4, 2, 3])
    alter(core, proposal(core, [1, 2, 3]))  # (nothing new)
    records, _ = core.balance_partition_leaders()
    assert all(r.partition != 0 for r in records)


def test_targets_are_checked_like_kafka():
    core = cluster()
    assert reassign(core, [1, 2, 2]) == (
        E.invalid_replica_assignment,
        "The manual partition assignment includes the broker 2 more than once.",
    )
    assert reassign(core, [1, 2, 9]) == (
        E.invalid_replica_assignment,
        "The manual partition assignment includes broker 9, but no such broker is registered.",
    )
    assert reassign(core, [1, 2, 3], index=7)[0] == E.unknown_topic_or_partition
    assert reassign(core, [1, 2, 3], topic="nope")[0] == E.unknown_topic_or_partition
    assert reassign(core, [2, 4], allow_replication_factor_change=False) == (
        E.invalid_replication_factor,
        "The replication factor is changed from 3 to 2",
    )
    assert not partition(core).is_reassigning


def test_two_entries_for_one_partition_see_each_other():
    core = cluster()
    records, results = core.alter_partition_reassignments(
        [
            PartitionReassignment(topic="t", partition=0, replicas=[2, 3, 4]),
            PartitionReassignment(topic="t", partition=0, replicas=None),
        ]
    )
    assert [r.error_code for r in results] == [E.none, E.none]
    commit(core, (records, results))
    # (Kafka's revert too: the original brokers, in the order the reassignment listed them)
    assert state(core) == ((2, 3, 1), (1, 2, 3), 1, (), ())


def test_a_target_replica_out_of_the_isr_holds_it_though_every_adding_one_is_in():
    core = cluster()
    reassign(core, [2, 3, 4])
    alter(core, proposal(core, [1, 2]))  # 3 fell behind

    alter(core, proposal(core, [1, 2, 4]))
    assert state(core) == ((2, 3, 4, 1), (1, 2, 4), 1, (4,), (1,))

    alter(core, proposal(core, [1, 2, 3, 4]))
    assert state(core) == ((2, 3, 4), (2, 3, 4), 2, (), ())


def test_partitions_created_meanwhile_take_the_replication_factor_it_heads_for():
    core = cluster()
    reassign(core, [2, 4])  # 4 adding, 1 and 3 removing: four replicas for now
    assert len(partition(core).replicas) == 4
    [result] = commit(core, core.create_partitions([PartitionsIncrease(name="t", count=3)]))
    assert result.error_code == E.none
    assert len(partition(core, 2).replicas) == 2
