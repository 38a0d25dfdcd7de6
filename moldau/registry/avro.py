"""Avro schemas: validation (fastavro), identity, and Avro's schema resolution rules as a
compatibility check (the Avro specification's "Schema Resolution"; Java's
`SchemaCompatibility`).

A reader can read a writer's data when, recursively: both are the same primitive, or the
writer's is promoted to the reader's (int to long, float, double; long to float, double; float
to double; string and bytes both ways); records share a name and every reader field either
exists in the writer (by name or alias) with a readable type or has a default; enums share a
name and every writer symbol is a reader symbol, unless the reader has a default symbol; arrays'
items and maps' values are readable; fixed types share name and size; every branch of a writer
union is readable, and a writer that is not a union is readable by some branch of a reader
union. Logical types follow their underlying types, as in Avro.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from moldau.registry.errors import RegistryError
from moldau.registry.model import SchemaType
from moldau.registry.schemas import load_json, of_type

__all__ = ["AvroSchema", "parse_avro"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


def _without_parser_marks(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            key: _without_parser_marks(value)
            for key, value in schema.items()
            if not key.startswith("__fastavro")
        }
    if isinstance(schema, list):
        return [_without_parser_marks(item) for item in schema]
    return schema


@dataclass(slots=True)
class AvroSchema:
    """A valid Avro schema: the document as given and fastavro's form (full names)."""

    document: Any
    parsed: Any
    named: dict[str, Any] = field(default_factory=dict)
    schema_type: SchemaType = SchemaType.AVRO

    def canonical(self) -> str:
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(_without_parser_marks(self.parsed), separators=(",", ":"), sort_keys=True)

    def read_errors(self, writer: Any) -> list[str]:
        assert isinstance(writer, AvroSchema)
        checker = _Resolution(self.named, writer.named)
        checker.check(self.parsed, writer.parsed, "")
        return checker.errors


def parse_avro(text: str, references: Sequence[Any]) -> AvroSchema:
    """The Avro schema `text`; `references` (dependencies first) define named types it uses."""
    named: dict[str, Any] = {}
    for reference in of_type(references, SchemaType.AVRO):
        _parse_into(reference.schema.text, named, what=f"reference {reference.name!r}")
    document, parsed = _parse_into(text, named, what="schema")
    return AvroSchema(document=document, parsed=parsed, named=named)


def _parse_into(text: str, named: dict[str, Any], *, what: str) -> tuple[Any, Any]:
    document = load_json(text, what)
    missing = _missing_attribute(document)
    if missing:
        raise RegistryError.invalid_schema(f"{missing} in the {what}")
    try:
        parsed = fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
    except UnknownType as error:
        raise RegistryError.invalid_schema(f"unknown type {error.name!r} in the {what}") from None
    except (SchemaParseException, TypeError, ValueError, KeyError, AttributeError) as error:
        raise RegistryError.invalid_schema(f"{error} in the {what}") from None
    return document, parsed


_REQUIRED = {
    "record": ("fields", list),
    "error": ("fields", list),
    "enum": ("symbols", list),
    "fixed": ("size", int),
    "array": ("items", object),
    "map": ("values", object),
}


def _missing_attribute(document: Any) -> str | None:
    """The first complex type without an attribute the Avro specification requires of it
    (fastavro is lenient about some), or None."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and kind in _REQUIRED:
                attribute, expected = _REQUIRED[kind]
                if not isinstance(node.get(attribute), expected):
                    return f"a {kind} needs {attribute!r}"
            stack.extend(value for value in node.values() if isinstance(value, dict | list))
    return None


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema.get("type"))


def _short_name(full_name: str) -> str:
    return full_name.rsplit(".", 1)[-1]


def _aliases(schema: dict[str, Any]) -> set[str]:
    """A named type's aliases, unqualified (matching compares unqualified names)."""
    return {_short_name(str(alias)) for alias in schema.get("aliases") or ()}


class _Resolution:
    """One reader-against-writer check; `errors` collects what cannot be read."""

    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.errors: list[str] = []
        self._assumed: set[tuple[str, str]] = set()  # named pairs being checked (recursion)

    def _fail(self, path: str, message: str) -> None:
        self.errors.append(f"{message} at {path or '/'}")

    @staticmethod
    def _resolve(schema: Any, named: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return named.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema["type"]  # a primitive with properties (a logical type, say)
        return schema

    def readable(self, reader: Any, writer: Any) -> bool:
        """Whether `reader` reads `writer`, without recording why not."""
        saved, assumed = len(self.errors), set(self._assumed)
        self.check(reader, writer, "")
        ok = len(self.errors) == saved
        del self.errors[saved:]
        self._assumed = assumed
        return ok

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        if isinstance(writer, list):
            for index, branch in enumerate(writer):
                if isinstance(reader, list):
                    if not any(self.readable(option, branch) for option in reader):
                        self._fail(
                            f"{path}/{index}",
                            f"MISSING_UNION_BRANCH: reader union lacks writer type "
                            f"{_type_name(self._resolve(branch, self.writer_named))}",
                        )
                else:
                    self.check(reader, branch, f"{path}/{index}")
            return
        if isinstance(reader, list):
            if not any(self.readable(option, writer) for option in reader):
                self._fail(
                    path,
                    f"MISSING_UNION_BRANCH: reader union lacks writer type {_type_name(writer)}",
                )
            return
        reader_type, writer_type = _type_name(reader), _type_name(writer)
        if reader_type in _PRIMITIVES or writer_type in _PRIMITIVES:
            if reader_type != writer_type and reader_type not in _PROMOTIONS.get(
                writer_type, frozenset()
            ):
                self._fail(
                    path,
                    f"TYPE_MISMATCH: reader type {reader_type} is not compatible with "
                    f"writer type {writer_type}",
                )
            return
        if reader_type != writer_type:
            self._fail(
                path,
                f"TYPE_MISMATCH: reader type {reader_type} is not compatible with writer type "
                f"{writer_type}",
            )
            return
        if reader_type == "array":
            self.check(reader["items"], writer["items"], f"{path}/items")
        elif reader_type == "map":
            self.check(reader["values"], writer["values"], f"{path}/values")
        elif self._names_match(reader, writer, path):
            if reader_type == "fixed":
                if reader.get("size") != writer.get("size"):
                    self._fail(
                        f"{path}/size",
                        f"FIXED_SIZE_MISMATCH: expected {writer.get('size')}, "
                        f"found {reader.get('size')}",
                    )
            elif reader_type == "enum":
                self._check_enum(reader, writer, path)
            elif reader_type in ("record", "error"):
                self._check_record(reader, writer, path)

    def _names_match(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        reader_name, writer_name = _short_name(reader["name"]), _short_name(writer["name"])
        if reader_name == writer_name or writer_name in _aliases(reader):
            return True
        self._fail(
            f"{path}/name", f"NAME_MISMATCH: expected {writer['name']}, found {reader['name']}"
        )
        return False

    def _check_enum(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if "default" in reader:
            return
        missing = [s for s in writer.get("symbols", ()) if s not in reader.get("symbols", ())]
        if missing:
            self._fail(f"{path}/symbols", f"MISSING_ENUM_SYMBOLS: reader lacks {missing}")

    def _check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        pair = (reader["name"], writer["name"])
        if pair in self._assumed:  # a recursive type: assume what is being proven
            return
        self._assumed.add(pair)
        writer_fields = {f["name"]: f for f in writer.get("fields", ())}
        for index, reader_field in enumerate(reader.get("fields", ())):
            names = [reader_field["name"], *(reader_field.get("aliases") or ())]
            match = next((writer_fields[n] for n in names if n in writer_fields), None)
            if match is None:
                if "default" not in reader_field:
                    self._fail(
                        f"{path}/fields/{index}",
                        f"READER_FIELD_MISSING_DEFAULT_VALUE: {reader_field['name']}",
                    )
                continue
            self.check(reader_field["type"], match["type"], f"{path}/fields/{index}/type")
