"""The hand-written Fetch encoder must decode with kio's generated reader for every version."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from moldau.protocol.fetch_response import FetchPartitionData, FetchTopicData, encode_fetch_response


@dataclass
class _Region:
    data: bytes
    position: int = 0

    @property
    def length(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("version", range(4, 18))
def test_encoded_fetch_response_decodes_with_kio(version: int) -> None:
    topic = FetchTopicData(
        "events",
        uuid.UUID(int=77),
        [
            FetchPartitionData(
                0, 0, 10, 9, 2, [(1000, 3)], -1, [_Region(b"abc"), _Region(b"defg")]
            ),
            FetchPartitionData(1, 6, records=None, current_leader=(2, 5)),
            FetchPartitionData(2, 0, 5, 5, 0, None, -1, b""),
        ],
    )
    chunks = encode_fetch_response(
        version, throttle_time_ms=0, error_code=0, session_id=0, topics=[topic]
    )
    body = b"".join(c if isinstance(c, bytes) else c.data for c in chunks)
    assert any(isinstance(c, _Region) for c in chunks)
    decoded, size = entity_reader(load_response_schema(1, version))(body, 0)
    assert size == len(body)
    first, second, third = decoded.responses[0].partitions
    assert first.records == b"abcdefg"
    assert first.high_watermark == 10 and first.last_stable_offset == 9
    assert first.aborted_transactions[0].producer_id == 1000
    assert second.error_code == 6 and second.records is None
    assert third.records == b"" and third.aborted_transactions is None
    if version >= 13:
        assert decoded.responses[0].topic_id == uuid.UUID(int=77)
    else:
        assert decoded.responses[0].topic == "events"
