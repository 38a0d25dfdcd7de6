from moldau.metadata.delta import MetadataDelta, diff_from_empty
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ClientQuotaRecord
from moldau.metadata.serde import deserialize_record, serialize_record

ALICE = (("client-id", None), ("user", "alice"))


def replay(image, *records):
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(deserialize_record(serialize_record(record)))
    return delta.apply()


def test_client_quota_record_round_trips_with_a_hashable_entity():
    record = ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", value=1024.0)
    decoded = deserialize_record(serialize_record(record))
    assert decoded == record
    assert hash(decoded.entity) == hash(ALICE)


def test_replayed_quotas_set_and_remove_and_drop_empty_entities():
    image = replay(
        MetadataImage.empty(),
        ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", value=1024.0),
        ClientQuotaRecord(entity=ALICE, key="request_percentage", value=5.5),
    )
    assert dict(image.client_quotas[ALICE]) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 5.5,
    }
    image = replay(image, ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", remove=True))
    assert dict(image.client_quotas[ALICE]) == {"request_percentage": 5.5}
    catch_up = diff_from_empty(image)
    late = catch_up.apply()
    assert dict(late.client_quotas[ALICE]) == {"request_percentage": 5.5}
    image = replay(image, ClientQuotaRecord(entity=ALICE, key="request_percentage", remove=True))
    assert ALICE not in image.client_quotas
