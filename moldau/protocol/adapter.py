"""The one thin adapter between Kafka's wire format and Moldau's handlers.

kio ships a dataclass per (API, version, request|response), generated from Kafka's message specs.
Handlers are written once against field names: they read the decoded request of whatever version
arrived, and return a plain dict (nested dicts and lists) using the newest version's field names.
`build_entity` turns that dict into the dataclass of the version asked for, dropping fields that
version lacks and filling absent fields with the spec's defaults.

Request header layout (v1; v2 adds tagged fields after client_id):
    api_key int16 | api_version int16 | correlation_id int32 | client_id nullable int16-string
Response header: correlation_id int32 (v0); v1 adds tagged fields (an empty set is one 0x00 byte).
ApiVersions responses always use header v0 (KIP-511).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import logging
import os
import pkgutil
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import IO, Any, Final, cast

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

from moldau.protocol.shape import MalformedRequest, check_shape

log = logging.getLogger(__name__)

__all__ = [
    "MalformedRequest",
    "RequestHeader",
    "build_entity",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_request_pieces",
    "encode_response",
    "entity_to_dict",
    "frame_response",
    "is_flexible",
    "millis",
    "request_schema",
    "response_schema",
]

API_VERSIONS_KEY: Final = 18
_HEADER = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


@cache
def request_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@cache
def response_schema(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


def is_flexible(api_key: int, version: int) -> bool:
    schema = request_schema(api_key, version)
    return bool(schema is not None and schema.__flexible__)


def _skip_tagged_fields(frame: bytes | memoryview, offset: int) -> int:
    count, offset = _read_uvarint(frame, offset)
    for _ in range(count):
        _tag, offset = _read_uvarint(frame, offset)
        size, offset = _read_uvarint(frame, offset)
        offset += size
    if offset > len(frame):
        raise MalformedRequest("tagged fields run past the end of the frame")
    return offset


def _read_uvarint(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if offset >= len(data):
            raise MalformedRequest("truncated varint")
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def decode_request_header(
    frame: bytes | memoryview, *, served: Callable[[int, int], bool] | None = None
) -> RequestHeader:
    """Parse the header of a request frame (without its size prefix). With `served`, the header
    of a request for an API or version it refuses ends at its client id (`body_offset` -1):
    telling whether that header has tagged fields would load the version's message types, for
    a request the caller only refuses (a hostile client could have a server load every version
    kio knows)."""
    if len(frame) < _HEADER.size:
        raise MalformedRequest("frame shorter than a request header")
    api_key, api_version, correlation_id, client_id_length = _HEADER.unpack_from(frame, 0)
    offset = _HEADER.size
    client_id: str | None = None
    if client_id_length >= 0:
        end = offset + client_id_length
        if end > len(frame):
            raise MalformedRequest("client_id runs past the end of the frame")
        client_id = bytes(frame[offset:end]).decode("utf-8", "replace")
        offset = end
    elif client_id_length != -1:
        raise MalformedRequest("negative client_id length")
    if served is not None and not served(api_key, api_version):
        return RequestHeader(api_key, api_version, correlation_id, client_id, -1)
    # ApiVersions request headers are v2 for flexible versions like every other API, but a client
    # may send a version we do not know: then we cannot know the header version either and leave
    # the body unparsed (KIP-511 answers with a v0 response in that case).
    if is_flexible(api_key, api_version):
        offset = _skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id, offset)


def decode_request(header: RequestHeader, frame: bytes | memoryview) -> Any:
    """Decode the body of a request; raise MalformedRequest if it does not parse.

    The body's shape is checked first (`shape.py`): kio's decoder trusts claimed lengths."""
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise MalformedRequest(f"unknown api {header.api_key} v{header.api_version}")
    check_shape(schema, frame, header.body_offset)
    try:
        value, _size = entity_reader(schema)(frame, header.body_offset)
    except Exception as exc:
        raise MalformedRequest(f"cannot decode {schema.__name__}: {exc}") from exc
    return value


# --- building entities from dicts ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    convert: Callable[[Any], Any] | None
    default: Any


_ONE_MS = datetime.timedelta(milliseconds=1)


def millis(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or an int already in ms)."""
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS  # exact: kio's timedeltas are whole milliseconds
    return int(value)


def _to_timedelta(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _to_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    return _EPOCH + datetime.timedelta(milliseconds=int(value))


def _to_error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


_PRIMITIVE_CONVERTERS: Mapping[str, Callable[[Any], Any]] = {
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
    "error_code": _to_error_code,
}

_PRIMITIVE_DEFAULTS: Mapping[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "bool": False,
    "uuid": _ZERO_UUID,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": _EPOCH,
}


@cache
def _field_plans(cls: Any) -> tuple[_FieldPlan, ...]:
    plans = []
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        kafka_type = field.metadata.get("kafka_type")
        convert: Callable[[Any], Any] | None
        if isinstance(kind, EntityTupleField):
            convert = _tuple_of_entities(kind.type_)
        elif isinstance(kind, EntityField):
            convert = _entity_converter(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            inner = _PRIMITIVE_CONVERTERS.get(kafka_type or "")
            convert = _tuple_of(inner)
        else:
            convert = _PRIMITIVE_CONVERTERS.get(kafka_type or "")
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        elif kind.is_array:
            default = ()
        elif isinstance(kind, EntityField):
            default = _MISSING_ENTITY
        else:
            default = _PRIMITIVE_DEFAULTS.get(kafka_type or "", None)
        plans.append(_FieldPlan(field.name, convert, default))
    return tuple(plans)


_MISSING_ENTITY: Final = object()


def _tuple_of(inner: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def convert(values: Any) -> Any:
        if values is None:
            return None
        if inner is None:
            return tuple(values)
        return tuple(inner(v) for v in values)

    return convert


def _tuple_of_entities(cls: type[Any]) -> Callable[[Any], Any]:
    def convert(values: Any) -> Any:
        if values is None:
            return None
        return tuple(build_entity(cls, v) for v in values)

    return convert


def _entity_converter(cls: type[Any]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return None if value is None else build_entity(cls, value)

    return convert


STRICT_FIELDS_VARIABLE = "MOLDAU_STRICT_FIELDS"


class UnknownField(ValueError):
    """A message built from a dict with a key its schema has in no version (a misspelt field)."""


def _message_of(cls: Any) -> tuple[str, str] | None:
    """(package, side) of a kio message class: kio.schema.<message>.v<N>.<request|response>."""
    parts = cls.__module__.split(".")
    if len(parts) != 5 or not parts[3].startswith("v"):
        return None
    return ".".join(parts[:3]), parts[4]


@cache
def _version_modules(package_name: str, side: str) -> tuple[str, ...]:
    """The modules of a message's side, oldest version first."""
    package = importlib.import_module(package_name)
    versions = [v.name for v in pkgutil.iter_modules(package.__path__) if v.name[1:].isdigit()]
    versions.sort(key=lambda v: int(v[1:]))
    return tuple(f"{package_name}.{version}.{side}" for version in versions)


@cache
def _newest_field_names(cls: Any) -> frozenset[str]:
    """The field names of `cls` and of every structure of its message's newest version: what a
    dict written for every version almost always holds (one module more, where the whole
    message would be a dozen: a fuzzer's first requests of every old version loaded them all at
    once and held a server's loop for a second)."""
    message = _message_of(cls)
    modules = _version_modules(*message)[-1:] if message is not None else ()
    return _own_field_names(cls).union(*map(_module_field_names, modules))


@cache
def _known_field_names(cls: Any) -> frozenset[str]:
    """The field names of any structure of `cls`'s message (request or response) in any version:
    one dict answers every version, and versions rename nested structures, so a field of another
    version or structure is not taken for a mistake; a name the message never has is."""
    message = _message_of(cls)
    modules = _version_modules(*message) if message is not None else ()
    return _own_field_names(cls).union(*map(_module_field_names, modules))


@cache
def _module_field_names(module_name: str) -> frozenset[str]:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return frozenset()
    names: set[str] = set()
    for value in vars(module).values():
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            names.update(field.name for field in dataclasses.fields(value))
    return frozenset(names)


_reported_unknown: set[tuple[str, str]] = set()


@cache
def _own_field_names(cls: Any) -> frozenset[str]:
    return frozenset(field.name for field in dataclasses.fields(cls))


def _check_field_names(cls: Any, data: Mapping[str, Any]) -> None:
    """Refuse (MOLDAU_STRICT_FIELDS=1: tests) or log once (production) a key no version has.
    The newest version's module is imported only for a key this version lacks, and the other
    versions' only for a key the newest lacks too (importing all of a message's versions costs
    a tenth of a second)."""
    if _own_field_names(cls).issuperset(data):  # (the usual case, on every answer)
        return
    if _newest_field_names(cls).issuperset(data):
        return
    known = _known_field_names(cls)
    if known.issuperset(data):
        return
    unknown = sorted(set(data) - known)
    message = f"{cls.__module__}.{cls.__name__} has no field {', '.join(unknown)} in any version"
    if os.environ.get(STRICT_FIELDS_VARIABLE) == "1":
        raise UnknownField(message)
    key = (f"{cls.__module__}.{cls.__name__}", ",".join(unknown))
    if key not in _reported_unknown:
        _reported_unknown.add(key)
        log.error("%s (left out of the message)", message)


def build_entity(cls: type[Any], data: Any) -> Any:
    """Build `cls` (a kio dataclass) from a dict keyed by field name, or pass through an instance.
    A key the message has in no version is a mistake: `_check_field_names`."""
    if isinstance(data, cls):
        return data
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = entity_to_dict(data)
    else:
        _check_field_names(cls, data)
    kwargs = {}
    schema: Any = cls  # (the caches key on the class object)
    for plan in _field_plans(schema):
        if plan.name in data:
            value = data[plan.name]
            if plan.convert is not None and value is not None:
                value = plan.convert(value)
            kwargs[plan.name] = value
        elif plan.default is _MISSING_ENTITY:
            kwargs[plan.name] = build_entity(_nested_type(schema, plan.name), {})
        else:
            kwargs[plan.name] = plan.default
    return cls(**kwargs)


@cache
def _nested_type(cls: Any, name: str) -> type[Any]:
    for field in dataclasses.fields(cls):
        if field.name == name:
            kind = classify_field(field)
            assert isinstance(kind, EntityField | EntityTupleField)
            return kind.type_
    raise KeyError(name)


def entity_to_dict(entity: Any) -> dict[str, Any]:
    """A kio dataclass as nested dicts/lists (for tests, logging and the client)."""
    result: dict[str, Any] = {}
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if isinstance(value, tuple):
            value = [entity_to_dict(v) if dataclasses.is_dataclass(v) else v for v in value]
        elif dataclasses.is_dataclass(value):
            value = entity_to_dict(value)
        result[field.name] = value
    return result


# --- encoding --------------------------------------------------------------------------------------


def _response_header(api_key: int, version: int, correlation_id: int) -> bytes:
    flexible = api_key != API_VERSIONS_KEY and response_schema(api_key, version).__flexible__
    return _INT32.pack(correlation_id) + (b"\x00" if flexible else b"")


def encode_response_body(api_key: int, version: int, data: Any) -> bytes:
    schema = response_schema(api_key, version)
    entity = build_entity(schema, data)
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, entity)
    return buffer.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, data: Any) -> bytes:
    """A whole response frame: size prefix, header of the right version, body."""
    return frame_response(
        api_key, version, correlation_id, encode_response_body(api_key, version, data)
    )


def frame_response(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """Prefix an encoded response body with the frame size and the response header."""
    header = _response_header(api_key, version, correlation_id)
    return _INT32.pack(len(header) + len(body)) + header + body


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, data: Any
) -> bytes:
    """A whole request frame (used by Moldau's own client)."""
    return b"".join(encode_request_pieces(api_key, version, correlation_id, client_id, data))


# A write of at least this many bytes (a record batch) stays a piece of its own in a frame.
LARGE_WRITE_BYTES = 64 * 1024


class _FramePieces:
    """A kio writable that keeps a frame as pieces: small writes joined into bytearrays, large
    ones (record batches) by reference, so they are not copied on the way to the socket."""

    __slots__ = ("_small", "pieces", "size")

    def __init__(self) -> None:
        self._small = bytearray(4)  # the size prefix, set by `finish`
        self.pieces: list[bytes | bytearray | memoryview] = []
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        size = len(data)
        if size >= LARGE_WRITE_BYTES:
            self.pieces += [self._small, data]
            self._small = bytearray()
        else:
            self._small += data
        self.size += size
        return size

    def finish(self) -> list[bytes | bytearray | memoryview]:
        if self._small:
            self.pieces.append(self._small)
        first = self.pieces[0]
        assert isinstance(first, bytearray)
        _INT32.pack_into(first, 0, self.size)
        return self.pieces


def encode_request_pieces(
    api_key: int, version: int, correlation_id: int, client_id: str | None, data: Any
) -> list[bytes | bytearray | memoryview]:
    """A whole request frame as pieces to write one after another: record batches of
    LARGE_WRITE_BYTES or more are the caller's own buffers, not copies."""
    schema = request_schema(api_key, version)
    if schema is None:
        raise ValueError(f"unknown api {api_key} v{version}")
    entity = build_entity(schema, data)
    frame = _FramePieces()
    client_id_bytes = None if client_id is None else client_id.encode()
    frame.write(struct.pack(">hhi", api_key, version, correlation_id))
    if client_id_bytes is None:
        frame.write(struct.pack(">h", -1))
    else:
        frame.write(struct.pack(">h", len(client_id_bytes)) + client_id_bytes)
    if schema.__flexible__:
        frame.write(b"\x00")
    entity_writer(schema)(cast("IO[bytes]", frame), entity)  # kio only calls write()
    return frame.finish()


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without size prefix): (correlation_id, kio entity).

    Raises MalformedRequest when the frame is not a response of that version (another node's
    answers are checked as carefully as clients' requests)."""
    if len(frame) < 4:
        raise MalformedRequest("response frame shorter than its header")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    offset = 4
    flexible = api_key != API_VERSIONS_KEY and response_schema(api_key, version).__flexible__
    if flexible:
        offset = _skip_tagged_fields(frame, offset)
    schema = response_schema(api_key, version)
    check_shape(schema, frame, offset)
    try:
        value, _size = entity_reader(schema)(frame, offset)
    except Exception as exc:
        raise MalformedRequest(f"cannot decode {schema.__name__}: {exc}") from exc
    return correlation_id, value
