"""The wire format and each type's JSON form: what `moldau produce`/`consume` write and read."""

from __future__ import annotations

import json

import pytest

from moldau.registry.model import SchemaType
from moldau.registry.schema_types import parse
from moldau.registry.serde import Codec, SerdeError, codec_for, frame, unframe

ORDER_PROTO = """syntax = "proto3";
package shop;
message Order {
  string id = 1;
  message Line {
    string sku = 1;
    int32 count = 2;
  }
  repeated Line lines = 2;
}
message Refund { string order_id = 1; }
"""


def codec(schema_type: SchemaType, text: object) -> Codec:
    return codec_for(parse(schema_type, text if isinstance(text, str) else json.dumps(text)))


def test_framing_puts_magic_byte_and_big_endian_id_first() -> None:
    assert frame(258, b"x") == b"\0\0\0\1\2x"
    assert unframe(b"\0\0\0\1\2x") == (258, b"x")
    for data in (b"", b"\0\0\0", b"\1\0\0\0\1x", b"plain"):
        with pytest.raises(SerdeError, match="wire format"):
            unframe(data)


def test_avro_uses_its_json_encoding_and_resolves_with_a_reader_schema() -> None:
    fields = [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]
    writer = codec(SchemaType.AVRO, {"type": "record", "name": "U", "fields": fields})
    payload = writer.encode('{"name": "ada", "age": {"int": 36}}')
    assert payload == b"\x06ada\x02\x48"
    assert writer.decode(payload) == {"name": "ada", "age": {"int": 36}}
    reader = codec(SchemaType.AVRO, {"type": "record", "name": "U", "fields": fields[:1]})
    assert writer.decode(payload, reader) == {"name": "ada"}
    with pytest.raises(SerdeError, match="does not fit the Avro schema"):
        writer.encode('{"name": 1, "age": null}')
    with pytest.raises(SerdeError, match="not JSON"):
        writer.encode("{name")


def test_json_schema_documents_are_validated_both_ways() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    json_codec = codec(SchemaType.JSON, schema)
    assert json_codec.encode('{"n": 1}') == b'{"n":1}'
    with pytest.raises(SerdeError, match="at n: 'x' is not of type 'integer'"):
        json_codec.encode('{"n": "x"}')
    strict = codec(SchemaType.JSON, {**schema, "properties": {"n": {"maximum": 0}}})
    with pytest.raises(SerdeError, match="maximum"):
        json_codec.decode(b'{"n": 1}', strict)


def test_protobuf_encodes_the_first_message_and_decodes_by_message_indexes() -> None:
    proto = codec(SchemaType.PROTOBUF, ORDER_PROTO)
    payload = proto.encode('{"id": "o-1", "lines": [{"sku": "a", "count": 2}]}')
    assert payload[0] == 0  # message indexes [0], written as one byte
    assert proto.decode(payload) == {"id": "o-1", "lines": [{"sku": "a", "count": 2}]}
    # [1]: the second top-level message; [0, 0]: Order.Line (zig-zag varints, count first)
    assert proto.decode(b"\x02\x02" + b"\x0a\x02o9") == {"order_id": "o9"}
    assert proto.decode(b"\x04\x00\x00" + b"\x0a\x01a") == {"sku": "a"}
    with pytest.raises(SerdeError, match="no message at index path"):
        proto.decode(b"\x02\x08")
    with pytest.raises(SerdeError, match="cut short"):
        proto.decode(b"\x04\x80")
