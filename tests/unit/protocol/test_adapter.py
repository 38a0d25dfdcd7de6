"""The version adapter: dicts in, versioned kio entities and frames out, and back."""

from __future__ import annotations

import uuid

import pytest

from moldau.protocol.adapter import (
    STRICT_FIELDS_VARIABLE,
    MalformedRequest,
    UnknownField,
    build_entity,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_request_pieces,
    encode_response,
    response_schema,
)
from moldau.protocol.errors import ErrorCode

METADATA = {
    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
    "cluster_id": "abc",
    "controller_id": 1,
    "topics": [
        {
            "error_code": 0,
            "name": "orders",
            "topic_id": uuid.UUID(int=5),
            "partitions": [
                {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
            ],
        }
    ],
    "error_code": 0,
}


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_response_round_trips_for_every_version(version: int) -> None:
    frame = encode_response(3, version, 42, METADATA)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, response = decode_response(3, version, frame[4:])
    assert correlation_id == 42
    topic = response.topics[0]
    assert topic.name == "orders"
    assert topic.partitions[0].isr_nodes == (1,)
    assert response.brokers[0].port == 9092
    if version >= 10:
        assert topic.topic_id == uuid.UUID(int=5)
    if version >= 2:
        assert response.cluster_id == "abc"


def test_fields_a_version_lacks_are_dropped_and_missing_ones_defaulted() -> None:
    schema = response_schema(3, 0)
    entity = build_entity(schema, METADATA)
    assert not hasattr(entity, "cluster_id")  # (v2 and later have it)
    assert entity.topics[0].partitions[0].error_code == ErrorCode.none


def test_a_field_no_version_has_is_refused_in_tests_and_logged_once_otherwise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    misspelt = {**METADATA, "topics": [{**METADATA["topics"][0], "partitons": []}]}
    monkeypatch.setenv(STRICT_FIELDS_VARIABLE, "1")
    with pytest.raises(UnknownField, match="MetadataResponseTopic has no field partitons"):
        build_entity(response_schema(3, 12), misspelt)
    monkeypatch.setenv(STRICT_FIELDS_VARIABLE, "")
    for _ in range(3):
        build_entity(response_schema(3, 12), misspelt)
    assert caplog.text.count("has no field partitons in any version") == 1


@pytest.mark.parametrize("version", [3, 9])
def test_a_large_record_batch_is_a_piece_of_the_request_frame_not_a_copy(version: int) -> None:
    records = memoryview(bytes(range(256)) * 1024)
    data = {
        "acks": -1,
        "timeout": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    pieces = encode_request_pieces(0, version, 7, "client-1", data)
    assert any(piece is records for piece in pieces)
    frame = b"".join(pieces)
    assert frame == encode_request(0, version, 7, "client-1", {**data})
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header = decode_request_header(frame[4:])
    assert decode_request(header, frame[4:]).topic_data[0].partition_data[0].records == records


@pytest.mark.parametrize("version", [3, 7, 9, 13])
def test_request_header_and_body_decode(version: int) -> None:
    frame = encode_request(
        0,
        version,
        7,
        "client-1",
        {
            "acks": -1,
            "timeout": 1500,
            "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": b"xyz"}]}],
        },
    )[4:]
    header = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (0, version, 7)
    assert header.client_id == "client-1"
    request = decode_request(header, frame)
    assert request.acks == -1
    assert request.topic_data[0].partition_data[0].records == b"xyz"


def test_api_versions_response_header_is_always_v0() -> None:
    frame = encode_response(
        18, 3, 9, {"api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}]}
    )
    # size, correlation id, then error code directly: no tagged-field byte in the header.
    assert frame[4:8] == (9).to_bytes(4, "big")
    assert frame[8:10] == b"\x00\x00"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x10abc",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",
    ],
)
def test_malformed_headers_are_rejected(frame: bytes) -> None:
    with pytest.raises(MalformedRequest):
        decode_request_header(frame)


def test_truncated_body_is_rejected() -> None:
    frame = encode_request(
        0,
        9,
        1,
        None,
        {"acks": 1, "timeout": 1, "topic_data": [{"name": "t", "partition_data": []}]},
    )[4:]
    header = decode_request_header(frame[:-3])
    with pytest.raises(MalformedRequest):
        decode_request(header, frame[:-3])


def test_an_old_versions_answer_loads_the_newest_version_not_every_version() -> None:
    """Found by the network fuzzer: the first answers of many old versions each imported every
    version of their message to check the dict's keys, and held the loop a second. A key this
    version lacks is looked up in the newest version first (in a fresh interpreter: the modules
    this process has imported already would hide it)."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from uuid import UUID\n"
        "from moldau.protocol.adapter import build_entity, response_schema\n"
        f"build_entity(response_schema(3, 1), {METADATA!r})\n"
        "print(json.dumps([m for m in sys.modules if m.startswith('kio.schema.metadata.v')"
        " and m.endswith('.response')]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(result.stdout)
    assert "kio.schema.metadata.v1.response" in loaded
    assert len(loaded) == 2, loaded  # v1 and the newest


def test_a_header_the_caller_refuses_loads_no_message_types() -> None:
    """Found by the network fuzzer: a request for a version the server does not serve still
    loaded that version's message types to read its header, so hostile frames could have the
    server load every version kio knows (some 2 s of CPU on the event loop). With `served`, a
    refused request's header ends at its client id (in a fresh interpreter: the modules this
    process has imported already would hide it)."""
    import json
    import subprocess
    import sys

    script = (
        "import json, struct, sys\n"
        "from moldau.protocol.adapter import decode_request_header\n"
        "frame = struct.pack('>hhih', 3, 4, 7, 1) + b'c' + bytes(8)  # Metadata v4\n"
        "header = decode_request_header(frame, served=lambda key, version: version >= 9)\n"
        "print(json.dumps([header.correlation_id, header.client_id, header.body_offset,\n"
        "    [m for m in sys.modules if m.startswith('kio.schema.metadata.v')]]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == [7, "c", -1, []]
