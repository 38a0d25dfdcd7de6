"""The shape check accepts every frame kio writes and refuses lengths and nulls kio would trust."""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import subprocess
import sys
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)
from kio.serial.errors import SerialError

from moldau.protocol.adapter import decode_request, decode_request_header
from moldau.protocol.shape import MalformedRequest, _nullable, check_shape

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


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


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "int8":
            return rng.randint(-128, 127)
        case "uint8":
            return rng.randint(0, 255)
        case "int16":
            return rng.randint(-(2**15), 2**15 - 1)
        case "uint16":
            return rng.randint(0, 2**16 - 1)
        case "int32":
            return rng.randint(-(2**31), 2**31 - 1)
        case "uint32":
            return rng.randint(0, 2**32 - 1)
        case "int64":
            return rng.randint(-(2**63), 2**63 - 1)
        case "uint64":
            return rng.randint(0, 2**64 - 1)
        case "float64":
            return rng.random()
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        case "string":
            return "".join(rng.choice("abcé€𝄞") for _ in range(rng.randint(0, 6)))
        case "bytes" | "records":
            return rng.randbytes(rng.randint(0, 9))
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32":
            return datetime.timedelta(milliseconds=rng.randint(0, 2**31 - 1))
        case "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.randint(0, 2**40))
        case "datetime_i64":
            return EPOCH + datetime.timedelta(milliseconds=rng.randint(0, 2**40))
    raise AssertionError(kafka_type)


def _entity(schema: type[Any], rng: random.Random, depth: int = 0) -> Any:
    values = {}
    for field in dataclasses.fields(schema):
        kind = classify_field(field)
        kafka_type = field.metadata.get("kafka_type")
        if _nullable(field.type) and rng.random() < 0.3:
            values[field.name] = None
            continue
        if isinstance(kind, EntityTupleField):
            count = rng.randint(0, 3 if depth < 3 else 0)
            values[field.name] = tuple(_entity(kind.type_, rng, depth + 1) for _ in range(count))
        elif isinstance(kind, PrimitiveTupleField):
            values[field.name] = tuple(
                _primitive(kafka_type, rng) for _ in range(rng.randint(0, 4))
            )
        elif isinstance(kind, EntityField):
            values[field.name] = _entity(kind.type_, rng, depth + 1)
        else:
            values[field.name] = _primitive(kafka_type, rng)
    return schema(**values)


def _encode(schema: type[Any], entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=[name for name, _ in SCHEMAS])
def test_every_frame_kio_writes_passes_and_is_measured_exactly(name: str, schema: Any) -> None:
    rng = random.Random(name)
    for _ in range(12):
        body = _encode(schema, _entity(schema, rng))
        padded = b"\x07" * 3 + body
        assert check_shape(schema, padded, 3) == len(padded)
        # Every strict prefix is refused (no read past the end goes unnoticed).
        cut = rng.randint(0, len(body) - 1) if body else None
        if cut is not None:
            with pytest.raises(MalformedRequest):
                check_shape(schema, body[:cut], 0)


def test_a_null_where_the_schema_allows_none_is_refused() -> None:
    schema = load_request_schema(0, 9)  # Produce v9: topic_data is not nullable
    body = _encode(schema, _entity(schema, random.Random(1)))
    # transactional_id (compact nullable string), acks, timeout_ms, then topic_data's count.
    null_id = schema(transactional_id=None, acks=1, timeout=datetime.timedelta(0), topic_data=())
    body = _encode(schema, null_id)
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
            body = bytearray(_encode(schema, _entity(schema, rng)))
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
