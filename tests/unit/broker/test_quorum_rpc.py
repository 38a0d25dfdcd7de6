"""The quorum's RPCs read off the wire into the core's view, at every version the controller
listener serves."""

from moldau.broker.quorum_rpc import METADATA_TOPIC, METADATA_TOPIC_ID, request_from
from moldau.protocol.adapter import build_entity, request_schema
from moldau.protocol.api_keys import ApiKey


def test_a_metadata_fetch_of_an_old_version_reads_with_kafkas_defaults():
    # Fetch v4 has no current leader epoch, last fetched epoch or log start offset (a fuzzed
    # v4-v11 fetch once failed the handler with an AttributeError).
    for version in range(4, 19):
        schema = request_schema(ApiKey.FETCH, version)
        body = {
            "replica_id": 2,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1024,
            "topics": [
                {
                    "topic": METADATA_TOPIC,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [{"partition": 0, "fetch_offset": 7}],
                }
            ],
        }
        _, fetch = request_from(ApiKey.FETCH, 1, build_entity(schema, body))
        assert fetch.fetch_offset == 7, version
        if version < 12:
            assert fetch.last_fetched_epoch == -1  # INVALID_REQUEST from the core, as Kafka's
        if version < 9:
            assert fetch.current_leader_epoch == -1
