"""What the registry holds: schema types, references, subject versions, compatibility levels,
modes (Confluent's names and JSON spellings)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_COMPATIBILITY",
    "Compatibility",
    "Mode",
    "SchemaReference",
    "SchemaType",
    "StoredSchema",
    "SubjectVersion",
]


class SchemaType(enum.StrEnum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


class Compatibility(enum.StrEnum):
    """Which earlier versions a new one is checked against, and in which direction."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read what the earlier ones wrote."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The earlier schemas must read what the new one writes."""
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD


class Mode(enum.StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaReference:
    """A name the schema uses (an Avro type's full name, an imported .proto file, a JSON `$ref`)
    and the subject version that defines it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSchema:
    """A schema as registered once, under one id, whichever subjects use it."""

    schema_id: int
    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The fields Confluent's answers carry for a schema: `schemaType` only when not Avro,
        `references` only when there are some."""
        body: dict[str, Any] = {"schema": self.text}
        if self.schema_type is not SchemaType.AVRO:
            body["schemaType"] = self.schema_type.value
        if self.references:
            body["references"] = [reference.to_json() for reference in self.references]
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class SubjectVersion:
    subject: str
    version: int
    schema: StoredSchema
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "version": self.version,
            "id": self.schema.schema_id,
            **self.schema.to_json(),
        }
