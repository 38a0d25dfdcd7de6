"""Records in the registry's wire format, as Confluent's serializers write them, and their values
as JSON: what `moldau produce`/`consume` with `--value-schema`/`--key-schema` use.

    byte 0      magic byte 0
    bytes 1-4   the schema id, a big-endian int32
    Protobuf    the message indexes: which message of the .proto file, as zig-zag varints
                (their count, then each index; a lone 0 byte stands for [0], the first message)
    the rest    Avro's binary encoding / the JSON document as UTF-8 / the Protobuf message

JSON on either side is what each type's own tools print: Avro's JSON encoding (a union's
non-null value wrapped in its branch, `{"string": "x"}`, bytes as \\u00XX strings), the
document itself for JSON Schema (validated against the schema), and the Protobuf JSON mapping.
A reader schema, when given, reads what the writer's wrote: Avro's schema resolution; the
document validated against it for JSON Schema; the message parsed with its type for Protobuf.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Protocol

import fastavro
import jsonschema
import jsonschema.validators
from google.protobuf import json_format, message_factory
from google.protobuf.message import DecodeError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from moldau.registry.avro import AvroSchema
from moldau.registry.json_schema import JsonSchema
from moldau.registry.protobuf import ProtobufSchema
from moldau.registry.schemas import ParsedSchema

__all__ = ["MAGIC_BYTE", "Codec", "SerdeError", "codec_for", "frame", "unframe"]

MAGIC_BYTE = 0
_HEADER_BYTES = 5


class SerdeError(ValueError):
    """A value that does not fit its schema, or bytes that are not a framed record of it."""


def frame(schema_id: int, payload: bytes) -> bytes:
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, what follows it) of a framed record."""
    if len(data) < _HEADER_BYTES or data[0] != MAGIC_BYTE:
        raise SerdeError("not in the schema registry's wire format (no magic byte 0 and id)")
    return int.from_bytes(data[1:_HEADER_BYTES], "big"), data[_HEADER_BYTES:]


class Codec(Protocol):
    def encode(self, text: str) -> bytes:
        """The payload (after the id) for one JSON document."""
        ...

    def decode(self, payload: bytes, reader: Codec | None = None) -> Any:
        """The JSON data of a payload this codec's schema wrote, read with `reader`'s schema
        when given."""
        ...


def codec_for(schema: ParsedSchema) -> Codec:
    if isinstance(schema, AvroSchema):
        return AvroCodec(schema)
    if isinstance(schema, JsonSchema):
        return JsonCodec(schema)
    assert isinstance(schema, ProtobufSchema)
    return ProtobufCodec(schema)


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise SerdeError(f"not JSON: {error}") from None


class AvroCodec:
    def __init__(self, schema: AvroSchema) -> None:
        # (parsed again with fastavro's hints for writing, the referenced types known by name)
        self.schema = fastavro.parse_schema(schema.document, named_schemas=dict(schema.named))

    def encode(self, text: str) -> bytes:
        _json_document(text)  # (a clear message for what is not JSON at all)
        try:
            [record] = list(fastavro.json_reader(io.StringIO(text), self.schema))
            out = io.BytesIO()
            fastavro.schemaless_writer(out, self.schema, record)
        except Exception as error:  # fastavro's errors have no common base
            raise SerdeError(f"does not fit the Avro schema: {error}") from None
        return out.getvalue()

    def decode(self, payload: bytes, reader: Codec | None = None) -> Any:
        target = self.schema
        if reader is not None:
            if not isinstance(reader, AvroCodec):
                raise SerdeError("the reader schema is not an Avro schema, as the writer's is")
            target = reader.schema
        try:
            record = fastavro.schemaless_reader(io.BytesIO(payload), self.schema, target)
            out = io.StringIO()
            fastavro.json_writer(out, target, [record])
        except Exception as error:  # fastavro's errors have no common base
            raise SerdeError(f"cannot be read as Avro: {error}") from None
        return json.loads(out.getvalue())


class JsonCodec:
    def __init__(self, schema: JsonSchema) -> None:
        registry: Registry[Any] = Registry().with_resources(
            (name, Resource.from_contents(document, default_specification=DRAFT7))
            for name, document in schema.resources.items()
        )
        kind = jsonschema.validators.validator_for(
            schema.document, default=jsonschema.Draft7Validator
        )
        self.validator = kind(schema.document, registry=registry)

    def _checked(self, document: Any) -> Any:
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(document))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "the document"
            raise SerdeError(f"does not fit the JSON schema at {where}: {error.message}")
        return document

    def encode(self, text: str) -> bytes:
        document = self._checked(_json_document(text))
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, payload: bytes, reader: Codec | None = None) -> Any:
        try:
            document = json.loads(payload)
        except ValueError as error:
            raise SerdeError(f"not a JSON document: {error}") from None
        if reader is not None:
            if not isinstance(reader, JsonCodec):
                raise SerdeError("the reader schema is not a JSON schema, as the writer's is")
            reader._checked(document)
        return document


@dataclass(frozen=True, slots=True)
class _Indexes:
    path: tuple[int, ...]
    size: int  # bytes they took


def _zigzag_varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise SerdeError("the Protobuf message indexes are cut short")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), position


def _read_indexes(payload: bytes) -> _Indexes:
    count, position = _zigzag_varint(payload, 0)
    if count == 0:
        return _Indexes((0,), position)
    if not 0 < count <= 100:
        raise SerdeError(f"{count} Protobuf message indexes")
    path = []
    for _ in range(count):
        index, position = _zigzag_varint(payload, position)
        path.append(index)
    return _Indexes(tuple(path), position)


class ProtobufCodec:
    """Messages of the schema's .proto file; what is produced is its first message."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema

    def message_class(self, path: tuple[int, ...]) -> Any:
        file = self.schema.file
        messages, names = file.message_type, [file.package] if file.package else []
        for index in path:
            if not 0 <= index < len(messages):
                raise SerdeError(f"no message at index path {list(path)} in the .proto file")
            names.append(messages[index].name)
            messages = messages[index].nested_type
        descriptor = self.schema.pool.FindMessageTypeByName(".".join(names))
        return message_factory.GetMessageClass(descriptor)

    def encode(self, text: str) -> bytes:
        if not self.schema.file.message_type:
            raise SerdeError("the .proto file defines no message")
        message = self.message_class((0,))()
        try:
            json_format.Parse(text, message)
        except json_format.ParseError as error:
            raise SerdeError(f"does not fit the Protobuf message: {error}") from None
        return b"\0" + bytes(message.SerializeToString())

    def decode(self, payload: bytes, reader: Codec | None = None) -> Any:
        indexes = _read_indexes(payload)
        source = self
        if reader is not None:
            if not isinstance(reader, ProtobufCodec):
                raise SerdeError("the reader schema is not a Protobuf schema, as the writer's is")
            source = reader
        message = source.message_class(indexes.path)()
        try:
            message.ParseFromString(payload[indexes.size :])
        except DecodeError as error:
            raise SerdeError(f"cannot be read as Protobuf: {error}") from None
        return json_format.MessageToDict(message, preserving_proto_field_name=True)
