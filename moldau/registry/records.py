"""The records of the `_schemas` topic, as Confluent's Schema Registry writes them.

Keys and values are JSON (UTF-8). The topic is compacted, so a key names one thing and its
latest value is its state; a null value (tombstone) removes it.

    key                                                                value
    {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}             {"subject":S,"version":V,
                                                                        "id":I,"schema":TEXT,
                                                                        "deleted":B[,"schemaType":T]
                                                                        [,"references":[...]]}
                                                                       null: hard-deleted
    {"keytype":"CONFIG","subject":S|null,"magic":0}                    {"compatibilityLevel":L}
                                                                       null: config removed
    {"keytype":"MODE","subject":S|null,"magic":0}                      {"mode":M}, null: removed
    {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}                 {"subject":S,"version":V}
    {"keytype":"NOOP","magic":0}                                       null (marks a position)

`schemaType` is left out for Avro and `references` when empty, as Confluent does. Keys are
written with their fields in the order above, so the same logical key is always the same bytes
(compaction compares bytes). Readers ignore fields and key types they do not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from moldau.registry.model import SchemaReference, SchemaType, StoredSchema, SubjectVersion

__all__ = [
    "Record",
    "config_record",
    "decode_key",
    "decode_value",
    "delete_subject_record",
    "mode_record",
    "noop_record",
    "schema_record",
    "schema_tombstone",
]


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes
    value: bytes | None


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _schema_key(subject: str, version: int) -> bytes:
    return _encode({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_record(entry: SubjectVersion) -> Record:
    value: dict[str, Any] = {
        "subject": entry.subject,
        "version": entry.version,
        "id": entry.schema.schema_id,
        "schema": entry.schema.text,
        "deleted": entry.deleted,
    }
    if entry.schema.schema_type is not SchemaType.AVRO:
        value["schemaType"] = entry.schema.schema_type.value
    if entry.schema.references:
        value["references"] = [reference.to_json() for reference in entry.schema.references]
    return Record(_schema_key(entry.subject, entry.version), _encode(value))


def schema_tombstone(subject: str, version: int) -> Record:
    return Record(_schema_key(subject, version), None)


def config_record(subject: str | None, level: str | None) -> Record:
    key = _encode({"keytype": "CONFIG", "subject": subject, "magic": 0})
    return Record(key, None if level is None else _encode({"compatibilityLevel": level}))


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _encode({"keytype": "MODE", "subject": subject, "magic": 0})
    return Record(key, None if mode is None else _encode({"mode": mode}))


def delete_subject_record(subject: str, version: int) -> Record:
    key = _encode({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})
    return Record(key, _encode({"subject": subject, "version": version}))


def noop_record() -> Record:
    return Record(_encode({"keytype": "NOOP", "magic": 0}), None)


def _json_object(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def decode_key(raw: bytes | None) -> dict[str, Any] | None:
    """The key's JSON object, or None for a key this registry cannot read (skipped)."""
    document = _json_object(raw)
    return document if document is not None and "keytype" in document else None


def decode_value(raw: bytes | None) -> dict[str, Any] | None:
    """The value's JSON object; None for a tombstone (or a value that is not an object)."""
    return _json_object(raw)


def subject_version_of(value: dict[str, Any]) -> SubjectVersion:
    """A SCHEMA record's value (KeyError, ValueError: not one this registry can read)."""
    references = tuple(
        SchemaReference(
            name=str(reference["name"]),
            subject=str(reference["subject"]),
            version=int(reference["version"]),
        )
        for reference in value.get("references") or ()
    )
    schema = StoredSchema(
        schema_id=int(value["id"]),
        schema_type=SchemaType(value.get("schemaType") or "AVRO"),
        text=str(value["schema"]),
        references=references,
    )
    return SubjectVersion(
        subject=str(value["subject"]),
        version=int(value["version"]),
        schema=schema,
        deleted=bool(value.get("deleted", False)),
    )
