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
