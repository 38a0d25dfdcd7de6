"""The hand-written Produce encoder must write what the generic kio encoder writes, every version."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from moldau.protocol.adapter import encode_response_body
from moldau.protocol.produce_response import encode_produce_response

TOPIC_ID = uuid.UUID(int=42)


def _response(**partition_extra: Any) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": "events",
                "topic_id": TOPIC_ID,
                "partition_responses": [
                    {"index": 0, "error_code": ErrorCode.none, "base_offset": 1234,
                     "log_append_time": -1, "log_start_offset": 7},
                    {"index": 1, "error_code": 6, "base_offset": -1, "log_append_time": -1,
                     "log_start_offset": -1, **partition_extra},
                ],
            },
            {"name": "other", "topic_id": None, "partition_responses": []},
        ],
        "throttle_time": 0,
    }  # fmt: skip


CASES = {
    "plain": _response(),
    "errors": _response(
        error_message="not the leader",
        record_errors=[
            {"batch_index": 3, "batch_index_error_message": "bad"},
            {"batch_index": 4, "batch_index_error_message": None},
        ],
    ),
    "current leader": _response(current_leader={"leader_id": 2, "leader_epoch": 9}),
    "node endpoints": {
        **_response(),
        "throttle_time": 15,
        "node_endpoints": [{"node_id": 2, "host": "localhost", "port": 9093, "rack": None}],
    },
    "empty": {"responses": [], "throttle_time": 0},
    "append time": _response(log_append_time=1_700_000_000_123),
    "append time as datetime": _response(
        log_append_time=datetime.datetime(2026, 11, 22, 4, 0, 0, 123000, tzinfo=datetime.UTC)
    ),
}


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("case", sorted(CASES))
def test_produce_response_matches_the_generic_encoder(version: int, case: str) -> None:
    data = CASES[case]
    body = encode_produce_response(version, data)
    assert body is not None
    assert body == encode_response_body(0, version, data)
    decoded, size = entity_reader(load_response_schema(0, version))(body, 0)
    assert size == len(body)
    if data["responses"]:
        assert decoded.responses[0].partition_responses[0].base_offset == 1234
        assert (
            decoded.responses[0].partition_responses[1].error_code
            == ErrorCode.not_leader_or_follower
        )


def test_unknown_fields_fall_back_to_the_generic_encoder() -> None:
    assert encode_produce_response(9, {**_response(), "surprise": 1}) is None
    assert encode_produce_response(9, _response(surprise=1)) is None
    assert encode_produce_response(2, _response()) is None
