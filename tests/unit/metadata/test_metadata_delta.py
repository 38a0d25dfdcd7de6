import uuid

import pytest

from moldau.metadata.delta import MetadataDelta, MetadataReplayError, diff_from_empty
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from moldau.types import TopicPartition

ORDERS = uuid.UUID(int=1)
ORDERS_AGAIN = uuid.UUID(int=2)


def replay(image, *records):
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta, delta.apply()


def topic_records(name, topic_id, partitions=2, replicas=(1,)):
    return [TopicRecord(name=name, topic_id=topic_id)] + [
        PartitionRecord(
            topic_id=topic_id, partition=p, replicas=replicas, isr=replicas, leader=replicas[0]
        )
        for p in range(partitions)
    ]


def topic_config(name, key, value):
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, name=key, value=value
    )


def test_replaying_a_topic_builds_its_image_and_leaves_the_base_alone():
    base = MetadataImage.empty("cluster-a")
    delta, image = replay(
        base,
        *topic_records("orders", ORDERS, partitions=3),
        topic_config("orders", "retention.ms", "5"),
    )
    topic = image.topics["orders"]
    assert image.topics_by_id[ORDERS] is topic
    assert sorted(topic.partitions) == [0, 1, 2]
    assert topic.partitions[1].leader == 1 and topic.partitions[1].isr == (1,)
    assert dict(topic.configs) == {"retention.ms": "5"}
    assert image.partition(TopicPartition("orders", 2)).replicas == (1,)
    assert image.cluster_id == "cluster-a"
    assert base.topics == {}
    assert set(delta.created_topics()) == {"orders"}
    assert set(delta.changed_partitions()) == {TopicPartition("orders", p) for p in range(3)}
    assert delta.changed_topic_configs() == {}  # configs of a created topic come with the topic


def test_partition_change_bumps_leader_epoch_only_when_the_leader_moves():
    _, image = replay(
        MetadataImage.empty(), *topic_records("orders", ORDERS, partitions=1, replicas=(1, 2))
    )
    delta, image = replay(image, PartitionChangeRecord(topic_id=ORDERS, partition=0, isr=(1,)))
    partition = image.topics["orders"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch, partition.isr) == (
        1,
        0,
        1,
        (1,),
    )
    assert delta.changed_partitions() == {TopicPartition("orders", 0): partition}
    _, image = replay(
        image, PartitionChangeRecord(topic_id=ORDERS, partition=0, leader=2, isr=(2,))
    )
    partition = image.topics["orders"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 1, 2)


def test_a_leaderless_partition_keeps_its_isr_and_an_unclean_leader_is_recovering():
    _, image = replay(
        MetadataImage.empty(), *topic_records("orders", ORDERS, partitions=1, replicas=(1, 2))
    )
    _, image = replay(
        image,
        PartitionChangeRecord(topic_id=ORDERS, partition=0, isr=(1,)),
        PartitionChangeRecord(topic_id=ORDERS, partition=0, leader=-1),
    )
    partition = image.topics["orders"].partitions[0]
    assert not partition.has_leader and partition.isr == (1,) and partition.leader_epoch == 1
    assert partition.preferred_replica == 1
    _, image = replay(
        image,
        PartitionChangeRecord(
            topic_id=ORDERS, partition=0, leader=2, isr=(2,), leader_recovery_state=1
        ),
    )
    partition = image.topics["orders"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 2, 3)
    assert partition.leader_recovery_state == 1
    _, image = replay(image, PartitionChangeRecord(topic_id=ORDERS, partition=0, isr=(2, 1)))
    partition = image.topics["orders"].partitions[0]
    assert partition.leader_recovery_state == 1 and partition.leader_epoch == 2


def test_a_reassignment_is_recorded_on_the_partition_and_cleared_when_it_ends():
    _, image = replay(
        MetadataImage.empty(), *topic_records("orders", ORDERS, partitions=1, replicas=(1, 2))
    )
    _, image = replay(
        image,
        PartitionChangeRecord(
            topic_id=ORDERS,
            partition=0,
            replicas=(2, 3, 1),
            adding_replicas=(3,),
            removing_replicas=(1,),
        ),
    )
    partition = image.topics["orders"].partitions[0]
    assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == (
        (2, 3, 1),
        (3,),
        (1,),
    )
    assert partition.is_reassigning and partition.leader_epoch == 0
    assert image.topics["orders"].replication_factor == 2  # (where it is heading)
    _, image = replay(
        image,
        PartitionChangeRecord(
            topic_id=ORDERS,
            partition=0,
            leader=2,
            isr=(2, 3),
            replicas=(2, 3),
            adding_replicas=(),
            removing_replicas=(),
        ),
    )
    partition = image.topics["orders"].partitions[0]
    assert not partition.is_reassigning
    assert (partition.replicas, partition.isr, partition.leader) == ((2, 3), (2, 3), 2)


def test_removing_a_topic_drops_partitions_and_configs_and_reports_the_old_image():
    _, image = replay(
        MetadataImage.empty(),
        *topic_records("orders", ORDERS),
        topic_config("orders", "retention.ms", "5"),
    )
    old = image.topics["orders"]
    delta, after = replay(image, RemoveTopicRecord(topic_id=ORDERS))
    assert after.topics == {} and after.topics_by_id == {}
    assert delta.deleted_topics() == {ORDERS: old}
    assert after.topic_configs("orders") == {}


def test_a_topic_deleted_and_recreated_in_one_delta_appears_as_both():
    _, image = replay(MetadataImage.empty(), *topic_records("orders", ORDERS, partitions=2))
    delta, after = replay(
        image,
        RemoveTopicRecord(topic_id=ORDERS),
        *topic_records("orders", ORDERS_AGAIN, partitions=1),
        topic_config("orders", "cleanup.policy", "compact"),
    )
    assert after.topics["orders"].topic_id == ORDERS_AGAIN
    assert sorted(after.topics["orders"].partitions) == [0]
    assert dict(after.topics["orders"].configs) == {"cleanup.policy": "compact"}
    assert set(delta.deleted_topics()) == {ORDERS}
    assert delta.created_topics()["orders"].topic_id == ORDERS_AGAIN


def test_a_topic_created_and_removed_in_one_delta_leaves_no_trace():
    delta, image = replay(
        MetadataImage.empty(), *topic_records("tmp", ORDERS), RemoveTopicRecord(topic_id=ORDERS)
    )
    assert image.topics == {}
    assert delta.deleted_topics() == {} and delta.changed_topics() == {}


def test_config_records_set_and_delete_and_are_reported_as_changes():
    _, image = replay(MetadataImage.empty(), *topic_records("orders", ORDERS))
    delta, image = replay(
        image,
        topic_config("orders", "retention.ms", "5"),
        topic_config("orders", "segment.bytes", "1000"),
        topic_config("orders", "retention.ms", None),
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="",
            name="log.retention.ms",
            value="9",
        ),
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="1",
            name="log.retention.ms",
            value="7",
        ),
    )
    assert dict(image.topics["orders"].configs) == {"segment.bytes": "1000"}
    assert delta.changed_topic_configs() == {"orders": {"segment.bytes": "1000"}}
    assert delta.changed_broker_configs() == {"", "1"}
    assert image.broker_config_overrides(1) == {"log.retention.ms": "7"}
    assert image.broker_config_overrides(2) == {"log.retention.ms": "9"}
    _, image = replay(
        image,
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="1",
            name="log.retention.ms",
            value=None,
        ),
    )
    assert "1" not in image.broker_configs
    assert image.broker_config_overrides(1) == {"log.retention.ms": "9"}


def test_configs_of_an_unknown_topic_are_ignored():
    _, image = replay(MetadataImage.empty(), topic_config("ghost", "retention.ms", "5"))
    assert image.topics == {}


def test_brokers_register_fence_and_ignore_stale_epochs():
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="h", port=1)
    register = RegisterBrokerRecord(
        broker_id=1, incarnation_id=uuid.UUID(int=9), broker_epoch=5, endpoints=(endpoint,)
    )
    _, image = replay(
        MetadataImage.empty(), register, UnfenceBrokerRecord(broker_id=1, broker_epoch=5)
    )
    assert [b.broker_id for b in image.live_brokers()] == [1]
    assert image.brokers[1].endpoint("PLAINTEXT") == endpoint
    _, image = replay(image, FenceBrokerRecord(broker_id=1, broker_epoch=4))
    assert not image.brokers[1].fenced
    _, image = replay(image, FenceBrokerRecord(broker_id=1, broker_epoch=5))
    assert image.brokers[1].fenced and image.live_brokers() == []


def test_a_broker_in_controlled_shutdown_is_live_but_not_active_until_it_registers_again():
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="h", port=1)
    register = RegisterBrokerRecord(
        broker_id=1, incarnation_id=uuid.UUID(int=9), broker_epoch=5, endpoints=(endpoint,)
    )
    _, image = replay(
        MetadataImage.empty(), register, UnfenceBrokerRecord(broker_id=1, broker_epoch=5)
    )
    assert image.is_active_broker(1)
    _, stale = replay(
        image,
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=4, in_controlled_shutdown=True),
    )
    assert stale.is_active_broker(1)
    delta, image = replay(
        image,
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, in_controlled_shutdown=True),
    )
    assert set(delta.changed_brokers()) == {1}
    assert [b.broker_id for b in image.live_brokers()] == [1]
    assert image.active_brokers() == [] and not image.is_active_broker(1)
    _, image = replay(image, FenceBrokerRecord(broker_id=1, broker_epoch=5))
    assert image.brokers[1].in_controlled_shutdown
    _, image = replay(
        image,
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=uuid.UUID(int=10), broker_epoch=8, endpoints=(endpoint,)
        ),
        UnfenceBrokerRecord(broker_id=1, broker_epoch=8),
    )
    assert image.is_active_broker(1) and not image.is_active_broker(2)


def controller_record(controller_id, incarnation, port):
    return RegisterControllerRecord(
        controller_id=controller_id,
        incarnation_id=uuid.UUID(int=incarnation),
        endpoints=(BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=port),),
        features=(("metadata.version", 25, 25),),
    )


def test_a_controller_registration_replaces_the_one_before_and_leaves_brokers_alone():
    delta, image = replay(
        MetadataImage.empty(), controller_record(1, 10, 9093), controller_record(2, 20, 9094)
    )
    assert set(delta.changed_controllers()) == {1, 2} and not delta.is_empty
    assert image.brokers == {}
    assert image.controllers[1].endpoint("CONTROLLER").port == 9093
    assert image.controllers[1].endpoint("PLAINTEXT") is None
    assert dict(image.controllers[2].features) == {"metadata.version": (25, 25)}
    # A restart: a new incarnation, on another port; the other controller is left as it was.
    delta, restarted = replay(image, controller_record(1, 11, 9095))
    assert set(delta.changed_controllers()) == {1}
    assert restarted.controllers[1].incarnation_id == uuid.UUID(int=11)
    assert restarted.controllers[1].endpoints[0].port == 9095
    assert restarted.controllers[2] is image.controllers[2]
    assert image.controllers[1].incarnation_id == uuid.UUID(int=10)  # the base is unchanged
    rebuilt = diff_from_empty(restarted)
    assert set(rebuilt.changed_controllers()) == {1, 2}
    assert rebuilt.apply().controllers == restarted.controllers


def test_features_producer_ids_offset_and_controller():
    base = MetadataImage.empty()
    delta = MetadataDelta(base)
    delta.replay(FeatureLevelRecord(name="metadata.version", feature_level=25))
    delta.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000))
    delta.set_offset(41)
    delta.set_controller_id(3)
    image = delta.apply()
    assert (dict(image.features), image.next_producer_id, image.offset, image.controller_id) == (
        {"metadata.version": 25},
        1000,
        41,
        3,
    )


def test_records_that_do_not_fit_the_image_are_refused():
    with pytest.raises(MetadataReplayError):
        replay(
            MetadataImage.empty(),
            PartitionRecord(topic_id=ORDERS, partition=0, replicas=(1,), isr=(1,), leader=1),
        )
    _, image = replay(MetadataImage.empty(), *topic_records("orders", ORDERS, partitions=1))
    with pytest.raises(MetadataReplayError):
        replay(image, PartitionChangeRecord(topic_id=ORDERS, partition=5, leader=1))
    with pytest.raises(MetadataReplayError):
        replay(image, TopicRecord(name="again", topic_id=ORDERS))
    with pytest.raises(MetadataReplayError):
        replay(image, TopicRecord(name="orders", topic_id=ORDERS_AGAIN))
    with pytest.raises(MetadataReplayError):
        replay(image, RemoveTopicRecord(topic_id=ORDERS_AGAIN))


def test_diff_from_empty_recreates_the_image():
    _, image = replay(
        MetadataImage.empty("c"),
        *topic_records("orders", ORDERS),
        topic_config("orders", "retention.ms", "5"),
    )
    delta = diff_from_empty(image)
    rebuilt = delta.apply()
    assert rebuilt.topics == image.topics
    assert set(delta.created_topics()) == {"orders"}
