"""The next state of one partition (Kafka's PartitionChangeBuilder): elections and ISR rules."""

import uuid

from moldau.controller.partition_change import Election, partition_change
from moldau.metadata.image import PartitionImage
from moldau.metadata.records import PartitionChangeRecord

TOPIC = uuid.UUID(int=5)


def partition(leader=1, isr=(1, 2, 3), replicas=(1, 2, 3), recovery=0):
    return PartitionImage(
        partition=0,
        leader=leader,
        leader_epoch=4,
        partition_epoch=9,
        replicas=replicas,
        isr=isr,
        leader_recovery_state=recovery,
    )


def all_but(*excluded):
    return lambda broker_id: broker_id not in excluded


def change(**fields):
    return PartitionChangeRecord(topic_id=TOPIC, partition=0, **fields)


def test_nothing_to_change_is_no_record():
    assert partition_change(TOPIC, partition(), may_lead=all_but()) is None
    assert partition_change(TOPIC, partition(), may_lead=all_but(), target_isr=[1, 2, 3]) is None


def test_a_shrink_that_keeps_the_leader_changes_only_the_isr():
    record = partition_change(TOPIC, partition(), may_lead=all_but(), target_isr=[1, 3])
    assert record == change(isr=(1, 3))
    assert partition().merge(record).leader_epoch == 4


def test_a_leader_leaving_the_isr_is_replaced_by_the_first_isr_member_in_replica_order():
    record = partition_change(
        TOPIC, partition(isr=(1, 3, 2), replicas=(1, 2, 3)), may_lead=all_but(1), target_isr=[3, 2]
    )
    assert record == change(leader=2, isr=(3, 2))
    merged = partition().merge(record)
    assert (merged.leader, merged.leader_epoch, merged.partition_epoch) == (2, 5, 10)


def test_isr_members_that_may_not_lead_are_passed_over():
    record = partition_change(TOPIC, partition(), may_lead=all_but(1, 2), target_isr=[2, 3])
    assert record == change(leader=3, isr=(2, 3))


def test_the_last_isr_member_stays_in_the_isr_without_leading():
    record = partition_change(
        TOPIC, partition(isr=(1,)), may_lead=all_but(1), target_isr=[], election=Election.ONLINE
    )
    assert record == change(leader=-1)


def test_nobody_in_the_isr_may_lead_so_no_leader_unless_unclean():
    leaderless = partition(leader=-1, isr=(1,))
    assert partition_change(TOPIC, leaderless, may_lead=all_but(1)) is None
    record = partition_change(TOPIC, leaderless, may_lead=all_but(1), election=Election.UNCLEAN)
    assert record == change(leader=2, isr=(2,), leader_recovery_state=1)


def test_an_unclean_election_still_prefers_the_isr():
    record = partition_change(
        TOPIC, partition(leader=-1, isr=(3,)), may_lead=all_but(), election=Election.UNCLEAN
    )
    assert record == change(leader=3)


def test_a_leaderless_partition_gets_back_its_isr_member_when_it_may_lead_again():
    record = partition_change(TOPIC, partition(leader=-1, isr=(2,)), may_lead=all_but())
    assert record == change(leader=2)


def test_preferred_election_moves_to_the_first_replica_only_from_the_isr():
    led_by_two = partition(leader=2)
    record = partition_change(TOPIC, led_by_two, may_lead=all_but(), election=Election.PREFERRED)
    assert record == change(leader=1)
    not_in_isr = partition(leader=2, isr=(2, 3))
    assert (
        partition_change(TOPIC, not_in_isr, may_lead=all_but(), election=Election.PREFERRED) is None
    )
    assert (
        partition_change(TOPIC, led_by_two, may_lead=all_but(1), election=Election.PREFERRED)
        is None
    )


def test_recovery_state_changes_only_when_asked():
    recovering = partition(isr=(1,), recovery=1)
    assert partition_change(TOPIC, recovering, may_lead=all_but(), target_recovery_state=1) is None
    record = partition_change(TOPIC, recovering, may_lead=all_but(), target_recovery_state=0)
    assert record == change(leader_recovery_state=0)


def test_an_unclean_leader_alone_in_the_isr_completes_a_reassignment_it_is_the_target_of():
    reassigning = PartitionImage(
        partition=0,
        leader=-1,
        leader_epoch=4,
        partition_epoch=9,
        replicas=(3, 1),
        isr=(1,),
        adding_replicas=(3,),
        removing_replicas=(1,),
    )
    record = partition_change(TOPIC, reassigning, may_lead=all_but(1), election=Election.UNCLEAN)
    assert record == change(
        leader=3,
        isr=(3,),
        leader_recovery_state=1,
        replicas=(3,),
        adding_replicas=(),
        removing_replicas=(),
    )
