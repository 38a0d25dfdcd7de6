"""A metadata image as a snapshot: the records that rebuild it, in bytes (KIP-630, Kafka's
`MetadataImage.write` / `SnapshotGenerator`).

`image_records(image)` lists, for everything the image holds, the record that creates it as it
stands: finalized features (metadata.version first), brokers with their fencing and controlled
shutdown, controllers (KIP-919), broker configs, each topic with its configs and its partitions (leader and partition
epochs and leader recovery state included), client quotas, SCRAM credentials, ACLs and the
producer-id counter. Replaying them on an empty image gives back an equal image;
the offset (the snapshot's end) and the controller (the quorum's leader) are not records.

Byte layout of a snapshot's contents (big-endian), opaque to Raft:

    magic    4 bytes  b"MDSN"
    version  int16    0
    count    int32    number of records
    records  count x (size uint32, record in `serde`'s form)

Each record keeps its own type and version, so a snapshot is read the way the log is.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    acl_record,
)
from moldau.metadata.serde import RecordFormatError, deserialize_record, serialize_record

_MAGIC = b"MDSN"
_VERSION = 0
_HEADER = struct.Struct(">4shi")
_SIZE = struct.Struct(">I")
# Features whose level is read before anything else, as Kafka writes metadata.version first.
_FIRST_FEATURE = "metadata.version"


def image_records(image: MetadataImage) -> Iterator[MetadataRecord]:
    """Records that rebuild `image` when replayed, in order, on an empty image."""
    for name, level in sorted(image.features.items(), key=lambda f: (f[0] != _FIRST_FEATURE, f)):
        yield FeatureLevelRecord(name=name, feature_level=level)
    for broker_id, broker in sorted(image.brokers.items()):
        yield RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=broker.incarnation_id,
            broker_epoch=broker.broker_epoch,
            endpoints=broker.endpoints,
            rack=broker.rack,
            fenced=broker.fenced,
            is_controller=broker.is_controller,
        )
        if broker.in_controlled_shutdown:
            yield BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=broker.broker_epoch, in_controlled_shutdown=True
            )
    for controller_id, controller in sorted(image.controllers.items()):
        yield RegisterControllerRecord(
            controller_id=controller_id,
            incarnation_id=controller.incarnation_id,
            endpoints=controller.endpoints,
            features=tuple(
                (name, low, high) for name, (low, high) in sorted(controller.features.items())
            ),
            zk_migration_ready=controller.zk_migration_ready,
        )
    for resource_type, resources in (
        (ConfigResourceType.BROKER, image.broker_configs),
        (ConfigResourceType.CLIENT_METRICS, image.client_metrics),
        (ConfigResourceType.GROUP, image.group_configs),
    ):
        for resource_name, configs in sorted(resources.items()):
            for name, value in sorted(configs.items()):
                yield ConfigRecord(
                    resource_type=resource_type,
                    resource_name=resource_name,
                    name=name,
                    value=value,
                )
    for topic_name, topic in sorted(image.topics.items()):
        yield TopicRecord(name=topic_name, topic_id=topic.topic_id)
        for name, value in sorted(topic.configs.items()):
            yield ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=topic_name,
                name=name,
                value=value,
            )
        for index, partition in sorted(topic.partitions.items()):
            yield PartitionRecord(
                topic_id=topic.topic_id,
                partition=index,
                replicas=partition.replicas,
                isr=partition.isr,
                leader=partition.leader,
                leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch,
                removing_replicas=partition.removing_replicas,
                adding_replicas=partition.adding_replicas,
                leader_recovery_state=partition.leader_recovery_state,
            )
    for entity, quotas in sorted(image.client_quotas.items(), key=lambda q: repr(q[0])):
        for key, rate in sorted(quotas.items()):
            yield ClientQuotaRecord(entity=entity, key=key, value=rate)
    for (name, mechanism), credential in sorted(image.scram_credentials.items()):
        yield UserScramCredentialRecord.of(name, mechanism, credential)
    for acl_id, binding in sorted(image.acls.items()):
        yield acl_record(acl_id, binding)
    if image.next_producer_id:
        yield ProducerIdsRecord(
            broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id
        )


def encode_snapshot(image: MetadataImage) -> bytes:
    """The snapshot contents for `image` (CPU-bound: worth a worker thread for a large one)."""
    return encode_records(image_records(image))


def encode_records(records: Iterable[MetadataRecord]) -> bytes:
    """Records in the snapshot layout (also the bootstrap metadata `storage format` writes)."""
    parts = [b""]
    count = 0
    for record in records:
        data = serialize_record(record)
        parts.append(_SIZE.pack(len(data)))
        parts.append(data)
        count += 1
    parts[0] = _HEADER.pack(_MAGIC, _VERSION, count)
    return b"".join(parts)


def decode_snapshot_records(contents: bytes) -> list[MetadataRecord]:
    """The records of a snapshot; raises `RecordFormatError` for anything else."""
    if len(contents) < _HEADER.size:
        raise RecordFormatError(f"a metadata snapshot of {len(contents)} bytes has no header")
    magic, version, count = _HEADER.unpack_from(contents)
    if magic != _MAGIC or version != _VERSION:
        raise RecordFormatError(f"not a metadata snapshot of version {_VERSION}")
    records: list[MetadataRecord] = []
    position = _HEADER.size
    view = memoryview(contents)
    for _ in range(count):
        if position + _SIZE.size > len(contents):
            raise RecordFormatError("a metadata snapshot ends inside a record")
        (size,) = _SIZE.unpack_from(contents, position)
        position += _SIZE.size
        if position + size > len(contents):
            raise RecordFormatError("a metadata snapshot ends inside a record")
        records.append(deserialize_record(bytes(view[position : position + size])))
        position += size
    if position != len(contents):
        raise RecordFormatError("a metadata snapshot has bytes after its last record")
    return records


def decode_snapshot(
    contents: bytes, *, cluster_id: str, offset: int, controller_id: int = -1
) -> MetadataImage:
    """The image a snapshot holds, as of metadata log offset `offset` (its end offset - 1)."""
    delta = MetadataDelta(MetadataImage.empty(cluster_id))
    for record in decode_snapshot_records(contents):
        delta.replay(record)
    delta.set_offset(offset)
    delta.set_controller_id(controller_id)
    return delta.apply()
