import uuid

from moldau.controller.operations import NewTopic, PartitionReassignment
from moldau.metadata.records import FenceBrokerRecord, PartitionChangeRecord
from moldau.protocol.errors import ErrorCode

from .test_controller_core import commit, make_core


def three_broker_topic():
    core = make_core(brokers=(1, 2, 3))
    commit(core, core.create_topics([NewTopic(name="t", assignments={0: [1, 2, 3]})]))
    return core


def partition(core, index=0):
    return core.image.topics["t"].partitions[index]


def move_leader(core, leader):
    topic_id = core.image.topics["t"].topic_id
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=leader)], None))


def test_preferred_election_moves_leadership_back_to_the_first_replica():
    core = three_broker_topic()
    move_leader(core, 2)
    epoch = partition(core).leader_epoch

    [result] = commit(core, core.elect_leaders(0, [("t", [0])]))

    assert [(p.partition, p.error_code) for p in result.partitions] == [(0, ErrorCode.none)]
    assert partition(core).leader == 1
    assert partition(core).leader_epoch == epoch + 1


def test_preferred_election_of_a_fenced_preferred_replica_is_not_available():
    core = three_broker_topic()
    move_leader(core, 2)
    epoch = core.image.brokers[1].broker_epoch
    commit(core, ([FenceBrokerRecord(broker_id=1, broker_epoch=epoch)], None))

    records, [result] = core.elect_leaders(0, [("t", [0])])

    assert records == []
    assert [p.error_code for p in result.partitions] == [ErrorCode.preferred_leader_not_available]


def test_electing_everything_leaves_out_partitions_that_need_no_election():
    core = three_broker_topic()
    records, [result] = core.elect_leaders(0, None)
    assert records == []
    assert result.topic == "t" and list(result.partitions) == []


def test_unclean_election_picks_a_live_replica_of_a_leaderless_partition():
    core = three_broker_topic()
    topic_id: uuid.UUID = core.image.topics["t"].topic_id
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=-1, isr=())], None))

    [result] = commit(core, core.elect_leaders(1, [("t", [0])]))

    assert [p.error_code for p in result.partitions] == [ErrorCode.none]
    assert partition(core).leader == 1
    assert partition(core).isr == (1,)


def test_reassignment_checks_targets_like_kafka():
    core = three_broker_topic()

    def outcome(replicas, **options):
        records, [result] = core.alter_partition_reassignments(
            [PartitionReassignment(topic="t", partition=0, replicas=replicas)], **options
        )
        assert records == []
        return result.error_code, result.error_message

    assert outcome([1, 2, 3]) == (ErrorCode.none, None)
    assert outcome(None) == (
        ErrorCode.no_reassignment_in_progress,
        "No partition reassignment is in progress.",
    )
    assert outcome([]) == (
        ErrorCode.invalid_replica_assignment,
        "The manual partition assignment includes an empty replica list.",
    )
    assert outcome([1, 9]) == (
        ErrorCode.invalid_replica_assignment,
        "The manual partition assignment includes broker 9, but no such broker is registered.",
    )
    assert outcome([2, 2]) == (
        ErrorCode.invalid_replica_assignment,
        "The manual partition assignment includes the broker 2 more than once.",
    )
    assert outcome([1, 2], allow_replication_factor_change=False)[0] == (
        ErrorCode.invalid_replication_factor
    )


def test_preferred_election_is_not_available_while_the_preferred_replica_is_out_of_the_isr():
    core = three_broker_topic()
    topic_id = core.image.topics["t"].topic_id
    commit(
        core,
        ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=2, isr=(2, 3))], None),
    )
    records, [result] = core.elect_leaders(0, [("t", [0])])
    assert records == []
    assert [p.error_code for p in result.partitions] == [ErrorCode.preferred_leader_not_available]


def test_unclean_election_prefers_the_isr_and_is_not_needed_with_a_leader():
    core = three_broker_topic()
    records, [result] = core.elect_leaders(1, [("t", [0])])
    assert records == [] and result.partitions[0].error_code == ErrorCode.election_not_needed
    topic_id = core.image.topics["t"].topic_id
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=-1)], None))
    commit(core, core.elect_leaders(1, [("t", [0])]))
    assert (partition(core).leader, partition(core).isr) == (1, (1, 2, 3))
    assert partition(core).leader_recovery_state == 0


def test_unclean_election_without_any_live_replica_has_no_eligible_leader():
    core = three_broker_topic()
    topic_id = core.image.topics["t"].topic_id
    records = [PartitionChangeRecord(topic_id=topic_id, partition=0, leader=-1, isr=(1,))]
    records += [
        FenceBrokerRecord(broker_id=b, broker_epoch=core.image.brokers[b].broker_epoch)
        for b in (1, 2, 3)
    ]
    commit(core, (records, None))
    records, [result] = core.elect_leaders(1, [("t", [0])])
    assert records == []
    assert result.partitions[0].error_code == ErrorCode.eligible_leaders_not_available


def balanced_core(percentage):
    core = make_core(
        brokers=(1, 2, 3), **{"leader.imbalance.per.broker.percentage": str(percentage)}
    )
    commit(
        core,
        core.create_topics(
            [NewTopic(name="t", assignments={i: [1 + i % 3, 1 + (i + 1) % 3] for i in range(6)})]
        ),
    )
    return core


def test_the_leader_rebalance_moves_leaders_of_imbalanced_brokers_back_to_them():
    core = balanced_core(10)
    topic_id = core.image.topics["t"].topic_id
    # Broker 1 prefers partitions 0 and 3; it lost the lead of 0 (50 % > 10 %).
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=2)], None))
    records, _ = core.balance_partition_leaders()
    assert records == [PartitionChangeRecord(topic_id=topic_id, partition=0, leader=1)]
    commit(core, (records, None))
    assert core.balance_partition_leaders() == ([], None)


def test_the_leader_rebalance_leaves_brokers_within_the_allowed_imbalance_alone():
    core = balanced_core(50)
    topic_id = core.image.topics["t"].topic_id
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=2)], None))
    assert core.balance_partition_leaders() == ([], None)  # 50 % is not above 50 %


def test_the_leader_rebalance_waits_for_the_preferred_replica_to_be_in_the_isr_and_active():
    core = balanced_core(0)
    topic_id = core.image.topics["t"].topic_id
    commit(
        core,
        ([PartitionChangeRecord(topic_id=topic_id, partition=0, leader=2, isr=(2,))], None),
    )
    assert core.balance_partition_leaders() == ([], None)
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=0, isr=(2, 1))], None))
    epoch = core.image.brokers[1].broker_epoch
    commit(core, ([FenceBrokerRecord(broker_id=1, broker_epoch=epoch)], None))
    assert core.balance_partition_leaders() == ([], None)
