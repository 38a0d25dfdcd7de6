"""The byte form of metadata records in the metadata log (Moldau's own, versioned).

Layout of one serialized record (big-endian):

    record_type  int16   the record class's RECORD_TYPE
    version      int16   the record class's VERSION when written
    payload      bytes   UTF-8 JSON object of the fields, keys sorted

Bytes fields (a SCRAM credential's salt and keys) are base64 strings.
JSON keeps the log readable with `jq` and lets a newer field be added with a default: a reader
fills fields missing from an older version with their defaults and refuses versions newer than
its own. Kafka's metadata log layout is internal to Kafka; byte compatibility is not a goal.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
import uuid
from typing import Any

from moldau.metadata.records import RECORD_CLASSES, BrokerEndpoint, MetadataRecord

_HEADER = struct.Struct(">hh")


class RecordFormatError(ValueError):
    """Bytes in the metadata log that are not a record this version of Moldau can read."""


def serialize_record(record: MetadataRecord) -> bytes:
    payload = {field.name: _to_json(getattr(record, field.name)) for field in _fields(record)}
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(record.RECORD_TYPE, record.VERSION) + body


def deserialize_record(data: bytes) -> MetadataRecord:
    if len(data) < _HEADER.size:
        raise RecordFormatError(f"metadata record of {len(data)} bytes is shorter than its header")
    record_type, version = _HEADER.unpack_from(data)
    cls = RECORD_CLASSES.get(record_type)
    if cls is None:
        raise RecordFormatError(f"unknown metadata record type {record_type}")
    if version > cls.VERSION:
        raise RecordFormatError(
            f"{cls.__name__} version {version} is newer than the supported {cls.VERSION}"
        )
    try:
        payload = json.loads(data[_HEADER.size :].decode("utf-8"))
        kwargs = {
            field.name: _from_json(str(field.type), payload[field.name])
            for field in dataclasses.fields(cls)
            if field.name in payload
        }
        return cls(**kwargs)
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordFormatError(f"malformed {cls.__name__}: {exc}") from exc


def _fields(record: MetadataRecord) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(record)


def _to_json(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    if isinstance(value, BrokerEndpoint):
        return {
            "name": value.name,
            "host": value.host,
            "port": value.port,
            "security_protocol": value.security_protocol,
        }
    return value


def _from_json(annotation: str, value: Any) -> Any:
    """Convert a JSON value back by the field's annotation (a string under PEP 563)."""
    if value is None:
        return None
    if "UUID" in annotation:
        return uuid.UUID(value)
    if annotation == "bytes":
        return base64.b64decode(value, validate=True)
    if "BrokerEndpoint" in annotation:
        return tuple(BrokerEndpoint(**item) for item in value)
    if annotation.startswith("tuple[tuple"):
        return tuple(tuple(item) for item in value)
    if annotation.startswith("tuple"):
        return tuple(value)
    return value
