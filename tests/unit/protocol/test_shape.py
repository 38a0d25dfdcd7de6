"""The shape check accepts every frame kio writes and refuses lengths and nulls kio would trust."""

from __future__ import annotations

import datetime
import random
import subprocess
import sys
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from moldau.protocol.adapter import decode_request, decode_request_header
from moldau.protocol.shape import MalformedRequest, check_shape
from tests.fuzz.entities import encode_entity, random_entity


def _schemas() -> list[tuple[str, type[Any]]]:
    found = []
    for api_key in range(100):
        for version in range(20):
            for loader in (load_request_schema, load_response_schema):
                try:
                    schema = loader(api_key, version)
                except Exception:
                    continue
                found.append((f"{schema.__name__}-v{version}", schema))
    return found


SCHEMAS = _schemas()


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=[name for name, _ in SCHEMAS])
def test_every_frame_kio_writes_passes_and_is_measured_exactly(name: str, schema: Any) -> None:
    rng = random.Random(name)
    for _ in range(12):
        body = encode_entity(schema, random_entity(schema, rng))
        padded = b"\x07" * 3 + body
        assert check_shape(schema, padded, 3) == len(padded)
        # Every strict prefix is refused (no read past the end goes unnoticed).
        cut = rng.randint(0, len(body) - 1) if body else None
        if cut is not None:
            with pytest.raises(MalformedRequest):
                check_shape(schema, body[:cut], 0)


def test_a_null_where_the_schema_allows_none_is_refused() -> None:
    schema = load_request_schema(0, 9)  # Produce v9: topic_data is not nullable
    body = encode_entity(schema, random_entity(schema, random.Random(1)))
    # transactional_id (compact nullable string), acks, timeout_ms, then topic_data's count.
    null_id = schema(transactional_id=None, acks=1, timeout=datetime.timedelta(0), topic_data=())
    body = encode_entity(schema, null_id)
    assert body[-2] == 1  # the compact count of an empty array (0 + 1), then no tagged fields
    with pytest.raises(MalformedRequest, match="topic_data is null"):
        check_shape(schema, body[:-2] + b"\x00\x00", 0)


def test_the_21_byte_metadata_frame_is_refused_before_kio_sees_it() -> None:
    frame = bytes.fromhex("000000110003000c0000000200017800ffffffff0f")[4:]
    header = decode_request_header(frame)
    with pytest.raises(MalformedRequest, match="more elements than bytes"):
        decode_request(header, frame)


def test_unchecked_kio_really_aborts_on_that_frame() -> None:
    """Why the check exists: without it the process dies (so the check above can fail)."""
    code = (
        "from kio.serial import entity_reader; from kio.index import load_request_schema;"
        "entity_reader(load_request_schema(3, 12))(bytes.fromhex('ffffffff0f'), 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode != 0
    assert b"memory allocation" in result.stderr


def test_random_mutations_never_pass_a_frame_kio_cannot_read() -> None:
    """Mutated frames either fail the check, or kio reads exactly the bytes the check measured,
    or kio refuses a value with an ordinary exception (text that is not UTF-8, a negative
    duration): the dispatcher closes the connection on those too."""
    rng = random.Random(7)
    for name, schema in SCHEMAS[:: max(1, len(SCHEMAS) // 120)]:
        for _ in range(20):
            body = bytearray(encode_entity(schema, random_entity(schema, rng)))
            for _ in range(rng.randint(1, 4)):
                if body:
                    body[rng.randrange(len(body))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF))
            try:
                end = check_shape(schema, bytes(body), 0)
            except MalformedRequest:
                continue
            try:
                _value, size = entity_reader(schema)(bytes(body), 0)
            except (SerialError, ValueError, KeyError):  # bad UTF-8, a negative time, a new tag
                continue
            assert size == end, name
