"""Leaders and ISRs as brokers are fenced, unfenced and shut down (Kafka's
ReplicationControlManager.handleBrokerFenced / Unfenced / InControlledShutdown)."""

import uuid

from moldau.controller.operations import BrokerHeartbeat, BrokerRegistration, NewTopic
from moldau.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)

from .test_controller_core import commit, make_core

SESSION_MS = 9000


def core_with_topic(assignments, brokers=(1, 2, 3), **config):
    core = make_core(brokers=brokers, **{"broker.session.timeout.ms": str(SESSION_MS), **config})
    commit(core, core.create_topics([NewTopic(name="t", assignments=assignments)]))
    return core


def partition(core, index=0):
    return core.image.topics["t"].partitions[index]


def state(core, index=0):
    p = partition(core, index)
    return p.leader, p.isr, p.leader_epoch, p.partition_epoch


def heartbeat(core, broker_id, *, now_ms, offset=None, **flags):
    """A committed heartbeat of `broker_id`; (records, result)."""
    records, result = core.broker_heartbeat(
        BrokerHeartbeat(
            broker_id=broker_id,
            broker_epoch=core.image.brokers[broker_id].broker_epoch,
            current_metadata_offset=core.image.offset if offset is None else offset,
            **flags,
        ),
        now_ms=now_ms,
    )
    commit(core, (records, None))
    return records, result


def expire(core, *alive, now_ms=SESSION_MS + 1):
    """Every broker but `alive` misses its session; the controller fences them."""
    for broker_id in alive:
        heartbeat(core, broker_id, now_ms=now_ms - 1)
    records, _ = core.fence_expired_brokers(now_ms=now_ms)
    commit(core, (records, None))
    return records


def shrink_isr(core, isr, index=0):
    topic_id = core.image.topics["t"].topic_id
    commit(core, ([PartitionChangeRecord(topic_id=topic_id, partition=index, isr=isr)], None))


def test_a_fenced_leader_hands_over_to_the_next_isr_member_in_replica_order():
    core = core_with_topic({0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2, 4]}, brokers=(1, 2, 3, 4))
    records = expire(core, 2, 3, 4)
    assert [type(r) for r in records] == [PartitionChangeRecord] * 2 + [FenceBrokerRecord]
    assert state(core, 0) == (2, (2, 3), 1, 1)
    assert state(core, 1) == (2, (2, 3), 0, 1)  # a follower leaving: no new leader epoch
    assert state(core, 2) == (3, (3, 2, 4), 0, 0)  # not a replica there: untouched


def test_brokers_expiring_together_are_fenced_one_after_the_other():
    core = core_with_topic({0: [1, 2, 3]})
    expire(core, 3)
    assert state(core, 0) == (3, (3,), 2, 2)
    assert [b.broker_id for b in core.image.live_brokers()] == [3]


def test_the_last_isr_member_fenced_stays_in_the_isr_and_leads_again_when_unfenced():
    core = core_with_topic({0: [1, 2]})
    shrink_isr(core, (1,))
    expire(core, 2)
    assert state(core, 0) == (-1, (1,), 1, 2)
    records, result = heartbeat(core, 1, now_ms=SESSION_MS + 2)
    assert [type(r) for r in records] == [UnfenceBrokerRecord, PartitionChangeRecord]
    assert not result.is_fenced
    assert state(core, 0) == (1, (1,), 2, 3)


def enable_unclean_election(core, resource_type=ConfigResourceType.TOPIC, name="t"):
    """`unclean.leader.election.enable=true` for topic `name`, or the cluster-wide default."""
    record = ConfigRecord(
        resource_type=resource_type,
        resource_name=name,
        name="unclean.leader.election.enable",
        value="true",
    )
    commit(core, ([record], None))


def test_unclean_election_only_for_topics_that_enable_it():
    core = core_with_topic({0: [1, 2], 1: [1, 2]})
    enable_unclean_election(core)
    shrink_isr(core, (1,), index=0)
    shrink_isr(core, (1,), index=1)
    core_without = core_with_topic({0: [1, 2]})
    shrink_isr(core_without, (1,))
    expire(core, 2, 3)
    expire(core_without, 2, 3)
    assert state(core, 0)[:2] == (2, (2,))
    assert partition(core, 0).leader_recovery_state == 1
    assert state(core_without, 0)[:2] == (-1, (1,))
    assert partition(core_without, 0).leader_recovery_state == 0


def test_a_cluster_wide_unclean_default_applies_to_every_topic():
    core = core_with_topic({0: [1, 2]})
    enable_unclean_election(core, ConfigResourceType.BROKER, "")
    shrink_isr(core, (1,))
    expire(core, 2, 3)
    assert state(core, 0)[:2] == (2, (2,))


def test_an_unfenced_broker_leads_leaderless_partitions_whose_isr_it_is_in():
    core = core_with_topic({0: [1, 2], 1: [2, 1]})
    shrink_isr(core, (1,), index=0)
    shrink_isr(core, (2,), index=1)
    expire(core, 3, now_ms=SESSION_MS + 1)
    assert state(core, 0)[:2] == (-1, (1,)) and state(core, 1)[:2] == (-1, (2,))
    heartbeat(core, 2, now_ms=SESSION_MS + 5)
    assert state(core, 0)[:2] == (-1, (1,))  # 2 is not in its ISR
    assert state(core, 1)[:2] == (2, (2,))


def test_controlled_shutdown_moves_leaderships_first_then_lets_the_broker_go():
    core = core_with_topic({0: [1, 2, 3], 1: [2, 1, 3]})
    for broker_id in (1, 2, 3):
        heartbeat(core, broker_id, now_ms=100)
    records, result = heartbeat(core, 1, now_ms=200, want_shut_down=True)
    assert [type(r) for r in records] == [
        BrokerRegistrationChangeRecord,
        PartitionChangeRecord,
        PartitionChangeRecord,
    ]
    assert not result.is_fenced and not result.should_shut_down
    shutting_down = core.image.brokers[1]
    assert shutting_down.in_controlled_shutdown and not shutting_down.fenced
    assert state(core, 0) == (2, (2, 3), 1, 1)
    assert state(core, 1) == (2, (2, 3), 0, 1)
    moved_at = core.image.offset  # (the move is one entry: a broker has replayed all or none)
    # Brokers 2 and 3 have not yet said they replayed the move: not yet.
    records, result = heartbeat(core, 1, now_ms=300, want_shut_down=True)
    assert records == [] and not result.should_shut_down
    heartbeat(core, 2, now_ms=400, offset=moved_at)
    heartbeat(core, 3, now_ms=400, offset=moved_at - 3)
    _, result = heartbeat(core, 1, now_ms=500, want_shut_down=True)
    assert not result.should_shut_down
    heartbeat(core, 3, now_ms=600, offset=moved_at)
    records, result = heartbeat(core, 1, now_ms=700, want_shut_down=True)
    assert [type(r) for r in records] == [FenceBrokerRecord]
    assert result.should_shut_down and result.is_fenced
    # A late heartbeat without want_shut_down does not bring it back.
    records, result = heartbeat(core, 1, now_ms=800)
    assert records == [] and result.is_fenced


def test_the_sole_isr_member_shutting_down_leaves_its_partition_without_leader():
    core = core_with_topic({0: [1]}, brokers=(1, 2))
    heartbeat(core, 1, now_ms=100)
    heartbeat(core, 2, now_ms=100)
    _records, result = heartbeat(core, 1, now_ms=200, want_shut_down=True)
    assert state(core, 0) == (-1, (1,), 1, 1)
    assert not result.should_shut_down
    heartbeat(core, 2, now_ms=300)
    _, result = heartbeat(core, 1, now_ms=400, want_shut_down=True)
    assert result.should_shut_down


def test_a_fenced_broker_asking_to_shut_down_may_go_at_once():
    core = core_with_topic({0: [1, 2]})
    expire(core, 2, 3)
    records, result = heartbeat(core, 1, now_ms=SESSION_MS + 5, want_shut_down=True)
    assert records == [] and result.should_shut_down and result.is_fenced


def test_want_fence_moves_leaderships_like_a_session_timeout():
    core = core_with_topic({0: [1, 2]})
    records, result = heartbeat(core, 1, now_ms=100, want_fence=True)
    assert [type(r) for r in records] == [PartitionChangeRecord, FenceBrokerRecord]
    assert result.is_fenced and not result.should_shut_down
    assert state(core, 0)[:2] == (2, (2,))


def test_controlled_shutdown_survives_a_change_of_active_controller():
    core = core_with_topic({0: [1, 2]})
    heartbeat(core, 2, now_ms=100)
    heartbeat(core, 1, now_ms=100, want_shut_down=True)
    core.activate(now_ms=1000)  # a new active controller: no soft state but the image
    _, result = heartbeat(core, 1, now_ms=1100, want_shut_down=True)
    assert not result.should_shut_down and core.image.brokers[1].in_controlled_shutdown
    heartbeat(core, 2, now_ms=1200)
    heartbeat(core, 3, now_ms=1200)
    _, result = heartbeat(core, 1, now_ms=1300, want_shut_down=True)
    assert result.should_shut_down


def test_a_new_incarnation_of_a_broker_still_unfenced_fences_the_old_one_first():
    core = core_with_topic({0: [1, 2]})
    heartbeat(core, 2, now_ms=SESSION_MS)
    old_epoch = core.image.brokers[1].broker_epoch
    records, result = core.register_broker(
        BrokerRegistration(
            broker_id=1,
            incarnation_id=uuid.UUID(int=77),
            endpoints=[BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9091)],
        ),
        now_ms=SESSION_MS + 1,
        unfence=False,
    )
    assert [type(r) for r in records] == [
        PartitionChangeRecord,
        FenceBrokerRecord,
        RegisterBrokerRecord,
    ]
    assert records[1] == FenceBrokerRecord(broker_id=1, broker_epoch=old_epoch)
    commit(core, (records, None))
    assert state(core, 0)[:2] == (2, (2,)) and result.broker_epoch > old_epoch
