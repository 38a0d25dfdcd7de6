import dataclasses
import uuid

import pytest

from moldau.metadata.acls import AclOperation, AclPermission, PatternType, ResourceType
from moldau.metadata.delta import MetadataDelta, diff_images
from moldau.metadata.image import (
    BrokerImage,
    ControllerImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from moldau.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderRecoveryState,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from moldau.metadata.serde import RecordFormatError
from moldau.metadata.snapshot import decode_snapshot, encode_snapshot, image_records
from moldau.types import TopicPartition

ORDERS, CLICKS, GONE, NEW = (uuid.UUID(int=i) for i in range(1, 5))


def build(*records, base=None, offset=41):
    delta = MetadataDelta(base or MetadataImage.empty("cluster-a"))
    for record in records:
        delta.replay(record)
    delta.set_offset(offset)
    return delta.apply()


def broker(broker_id, *, rack=None, is_controller=False):
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=100 + broker_id),
        broker_epoch=7 + broker_id,
        endpoints=(
            BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id),
            BrokerEndpoint(name="SSL", host="10.0.0.1", port=9190 + broker_id, security_protocol=1),
        ),
        rack=rack,
        fenced=False,
        is_controller=is_controller,
    )


def controller(controller_id, *, incarnation, port):
    return RegisterControllerRecord(
        controller_id=controller_id,
        incarnation_id=uuid.UUID(int=incarnation),
        endpoints=(BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=port),),
        features=(("kraft.version", 0, 1), ("metadata.version", 25, 25)),
    )


def config(resource_type, resource_name, name, value):
    return ConfigRecord(
        resource_type=resource_type, resource_name=resource_name, name=name, value=value
    )


def rich_image() -> MetadataImage:
    """Every kind of thing an image holds, several of them changed after their creation."""
    return build(
        FeatureLevelRecord(name="group.version", feature_level=1),
        FeatureLevelRecord(name="metadata.version", feature_level=25),
        broker(1, rack="rack-a", is_controller=True),
        broker(2),
        broker(3, rack="rack-b"),
        FenceBrokerRecord(broker_id=3, broker_epoch=10),
        controller(1, incarnation=201, port=19091),
        controller(5, incarnation=205, port=19095),
        controller(1, incarnation=301, port=29091),  # restarted on another port
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=9, in_controlled_shutdown=True),
        config(ConfigResourceType.BROKER, "", "log.retention.ms", "1000"),
        config(ConfigResourceType.BROKER, "2", "log.cleaner.threads", "2"),
        config(ConfigResourceType.CLIENT_METRICS, "java-clients", "interval.ms", "1000"),
        config(ConfigResourceType.CLIENT_METRICS, "java-clients", "metrics", "*"),
        config(ConfigResourceType.GROUP, "queue", "share.auto.offset.reset", "earliest"),
        TopicRecord(name="orders", topic_id=ORDERS),
        config(ConfigResourceType.TOPIC, "orders", "cleanup.policy", "compact"),
        PartitionRecord(topic_id=ORDERS, partition=0, replicas=(1, 2, 3), isr=(1, 2), leader=1),
        PartitionRecord(
            topic_id=ORDERS,
            partition=1,
            replicas=(2, 3, 1),
            isr=(2, 3, 1),
            leader=2,
            removing_replicas=(1,),
            adding_replicas=(3,),
        ),
        PartitionChangeRecord(topic_id=ORDERS, partition=0, leader=2, isr=(2,)),
        PartitionChangeRecord(topic_id=ORDERS, partition=0, isr=(2, 1)),
        PartitionChangeRecord(
            topic_id=ORDERS,
            partition=1,
            leader=3,
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        ),
        TopicRecord(name="clicks", topic_id=CLICKS),
        PartitionRecord(topic_id=CLICKS, partition=0, replicas=(3,), isr=(3,), leader=-1),
        TopicRecord(name="gone", topic_id=GONE),
        RemoveTopicRecord(topic_id=GONE),
        ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1024.0),
        ClientQuotaRecord(
            entity=(("user", None), ("client-id", "app")), key="request_percentage", value=50.0
        ),
        scram("alice", "SCRAM-SHA-256", b"\x01"),
        scram("alice", "SCRAM-SHA-512", b"\x02"),
        scram("bob", "SCRAM-SHA-512", b"\x03"),
        scram("alice", "SCRAM-SHA-512", b"\x04"),  # a new password
        RemoveUserScramCredentialRecord(name="bob", mechanism="SCRAM-SHA-512"),
        acl(ACL_KEPT, "orders", PatternType.LITERAL, AclPermission.ALLOW),
        acl(ACL_GONE, "ord", PatternType.PREFIXED, AclPermission.DENY),
        RemoveAccessControlEntryRecord(id=ACL_GONE),
        ProducerIdsRecord(broker_id=1, broker_epoch=8, next_producer_id=3000),
    )


ACL_KEPT = uuid.UUID(int=901)
ACL_GONE = uuid.UUID(int=902)


def acl(acl_id, name, pattern, permission):
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=pattern,
        principal="User:alice",
        host="*",
        operation=AclOperation.READ,
        permission_type=permission,
    )


def scram(name, mechanism, salt):
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=salt,
        stored_key=salt * 32,
        server_key=b"\xff" + salt * 31,
        iterations=4096,
    )


def test_an_image_survives_a_round_trip_through_a_snapshot():
    image = rich_image()
    assert image.topics["orders"].partitions[0].leader_epoch == 1  # changed after creation
    restored = decode_snapshot(
        encode_snapshot(image), cluster_id="cluster-a", offset=41, controller_id=-1
    )
    assert restored == image
    assert restored.brokers[3].fenced and not restored.brokers[1].fenced
    assert restored.brokers[2].in_controlled_shutdown
    assert restored.topics["orders"].partitions[1].leader_recovery_state == 1
    assert sorted(restored.scram_credentials) == [
        ("alice", "SCRAM-SHA-256"),
        ("alice", "SCRAM-SHA-512"),
    ]
    assert restored.scram_credentials[("alice", "SCRAM-SHA-512")].salt == b"\x04"
    assert list(restored.acls) == [ACL_KEPT]
    assert restored.acls[ACL_KEPT].resource_name == "orders"
    assert restored.acls[ACL_KEPT].permission == AclPermission.ALLOW
    assert restored.topics_by_id[ORDERS] is restored.topics["orders"]
    assert dict(restored.client_metrics["java-clients"]) == {"interval.ms": "1000", "metrics": "*"}
    assert dict(restored.group_configs["queue"]) == {"share.auto.offset.reset": "earliest"}
    assert restored.controllers[1].incarnation_id == uuid.UUID(int=301)
    assert restored.controllers[1].endpoint("CONTROLLER").port == 29091
    assert restored.controllers[5].features["metadata.version"] == (25, 25)
    # What replaying the records finds first: metadata.version, as Kafka writes it.
    assert next(iter(image_records(image))) == FeatureLevelRecord(
        name="metadata.version", feature_level=25
    )


def test_an_empty_image_is_a_snapshot_of_no_records():
    empty = MetadataImage.empty("cluster-a")
    assert list(image_records(empty)) == []
    assert decode_snapshot(encode_snapshot(empty), cluster_id="cluster-a", offset=-1) == empty


# The fields a snapshot writes back, per image class. A field added to one of these classes
# fails here until `image_records` writes it (and this list names it).
SNAPSHOTTED_FIELDS = {
    MetadataImage: {
        "cluster_id",  # the node's own, not a record
        "controller_id",  # the quorum's leader, not a record
        "offset",  # the snapshot's end offset
        "topics",
        "topics_by_id",
        "brokers",
        "broker_configs",
        "client_metrics",
        "group_configs",
        "features",
        "next_producer_id",
        "client_quotas",
        "controllers",
        "scram_credentials",
        "acls",
    },
    ControllerImage: {
        "controller_id",
        "incarnation_id",
        "endpoints",
        "features",
        "zk_migration_ready",
    },
    TopicImage: {"name", "topic_id", "partitions", "configs"},
    PartitionImage: {
        "partition",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "replicas",
        "isr",
        "removing_replicas",
        "adding_replicas",
        "leader_recovery_state",
    },
    BrokerImage: {
        "broker_id",
        "incarnation_id",
        "broker_epoch",
        "endpoints",
        "rack",
        "fenced",
        "is_controller",
        "in_controlled_shutdown",
    },
}


@pytest.mark.parametrize("image_class", list(SNAPSHOTTED_FIELDS), ids=lambda c: c.__name__)
def test_every_field_of_the_image_is_written_to_snapshots(image_class):
    assert {f.name for f in dataclasses.fields(image_class)} == SNAPSHOTTED_FIELDS[image_class]


@pytest.mark.parametrize(
    "contents",
    [b"", b"MDSN", b"XXXX\x00\x00\x00\x00\x00\x00", b"MDSN\x00\x00\x00\x00\x00\x02\x00\x00"],
    ids=["empty", "short header", "bad magic", "missing records"],
)
def test_bytes_that_are_not_a_snapshot_are_refused(contents):
    with pytest.raises(RecordFormatError):
        decode_snapshot(contents, cluster_id="c", offset=0)


def test_a_snapshot_loaded_in_place_of_an_image_is_reported_as_a_delta():
    before = rich_image()
    after = build(
        RemoveTopicRecord(topic_id=CLICKS),
        TopicRecord(name="new", topic_id=NEW),
        PartitionRecord(topic_id=NEW, partition=0, replicas=(1,), isr=(1,), leader=1),
        PartitionChangeRecord(topic_id=ORDERS, partition=1, leader=3),
        config(ConfigResourceType.TOPIC, "orders", "retention.ms", "5"),
        config(ConfigResourceType.BROKER, "2", "log.cleaner.threads", None),
        FeatureLevelRecord(name="transaction.version", feature_level=1),
        controller(5, incarnation=405, port=19095),
        base=before,
        offset=90,
    )
    delta = diff_images(before, after)
    assert delta.apply() is after
    assert set(delta.created_topics()) == {"new"}
    assert set(delta.deleted_topics()) == {CLICKS}
    assert set(delta.changed_topics()) == {NEW, ORDERS}
    assert set(delta.changed_partitions()) == {
        TopicPartition("new", 0),
        TopicPartition("orders", 1),
    }
    assert set(delta.changed_topic_configs()) == {"orders"}
    assert delta.changed_broker_configs() == {"2"}
    assert delta.changed_brokers() == {}
    assert set(delta.changed_controllers()) == {5}
    assert delta.changed_features() == {"transaction.version": 1}
    assert not delta.is_empty
    assert diff_images(after, after).changed_topics() == {}
