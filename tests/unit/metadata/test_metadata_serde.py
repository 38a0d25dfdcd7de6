import struct
import uuid

import pytest

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
from moldau.metadata.serde import RecordFormatError, deserialize_record, serialize_record

TOPIC_ID = uuid.UUID("0b5c3a8e-2d57-4a0e-9d43-1f2a3b4c5d6e")

EVERY_RECORD = [
    TopicRecord(name="orders", topic_id=TOPIC_ID),
    PartitionRecord(
        topic_id=TOPIC_ID, partition=2, replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=4
    ),
    PartitionChangeRecord(topic_id=TOPIC_ID, partition=2, leader=2, isr=(2,)),
    PartitionChangeRecord(topic_id=TOPIC_ID, partition=0),
    PartitionChangeRecord(topic_id=TOPIC_ID, partition=1, leader=-1, leader_recovery_state=1),
    PartitionChangeRecord(
        topic_id=TOPIC_ID,
        partition=1,
        replicas=(4, 2, 3, 1),
        adding_replicas=(4,),
        removing_replicas=(1,),
    ),
    PartitionChangeRecord(topic_id=TOPIC_ID, partition=1, adding_replicas=(), removing_replicas=()),
    RemoveTopicRecord(topic_id=TOPIC_ID),
    ConfigRecord(
        resource_type=ConfigResourceType.TOPIC,
        resource_name="orders",
        name="retention.ms",
        value="1000",
    ),
    ConfigRecord(
        resource_type=ConfigResourceType.BROKER,
        resource_name="",
        name="log.retention.ms",
        value=None,
    ),
    RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=uuid.UUID(int=7),
        broker_epoch=12,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),),
        rack="r1",
    ),
    FenceBrokerRecord(broker_id=1, broker_epoch=12),
    UnfenceBrokerRecord(broker_id=1, broker_epoch=12),
    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=12, in_controlled_shutdown=True),
    ProducerIdsRecord(broker_id=1, broker_epoch=12, next_producer_id=2000),
    FeatureLevelRecord(name="metadata.version", feature_level=25),
    RegisterControllerRecord(
        controller_id=3,
        incarnation_id=uuid.UUID(int=9),
        endpoints=(BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=9093),),
        features=(("kraft.version", 0, 1), ("metadata.version", 25, 25)),
    ),
]


@pytest.mark.parametrize("record", EVERY_RECORD, ids=lambda r: type(r).__name__)
def test_every_record_survives_a_round_trip(record):
    data = serialize_record(record)
    assert struct.unpack_from(">hh", data) == (record.RECORD_TYPE, record.VERSION)
    assert deserialize_record(data) == record


def test_serialization_is_stable_for_equal_records():
    record = EVERY_RECORD[1]
    assert serialize_record(record) == serialize_record(
        PartitionRecord(
            **{
                "topic_id": TOPIC_ID,
                "partition": 2,
                "replicas": (1, 2, 3),
                "isr": (1, 2),
                "leader": 1,
                "leader_epoch": 4,
            }
        )
    )


def test_fields_missing_from_an_older_version_take_their_defaults():
    data = struct.pack(">hh", 3, 0) + (
        b'{"isr":[1],"leader":1,"partition":0,"replicas":[1],"topic_id":"%s"}'
        % str(TOPIC_ID).encode()
    )
    record = deserialize_record(data)
    assert record == PartitionRecord(
        topic_id=TOPIC_ID, partition=0, replicas=(1,), isr=(1,), leader=1
    )
    assert record.leader_epoch == 0
    assert record.leader_recovery_state == 0
    change = deserialize_record(
        struct.pack(">hh", 5, 0) + b'{"partition":0,"topic_id":"%s"}' % str(TOPIC_ID).encode()
    )
    assert change == PartitionChangeRecord(topic_id=TOPIC_ID, partition=0)


def test_a_version_newer_than_known_is_refused():
    data = bytearray(serialize_record(EVERY_RECORD[0]))
    struct.pack_into(">h", data, 2, 99)
    with pytest.raises(RecordFormatError, match="newer"):
        deserialize_record(bytes(data))


def test_unknown_record_types_and_garbage_are_refused():
    with pytest.raises(RecordFormatError, match="unknown metadata record type"):
        deserialize_record(struct.pack(">hh", 999, 0) + b"{}")
    with pytest.raises(RecordFormatError):
        deserialize_record(b"\x00")
    with pytest.raises(RecordFormatError):
        deserialize_record(struct.pack(">hh", 2, 0) + b"not json")
