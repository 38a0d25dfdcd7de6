"""Compatibility matrices: one evolution per row and what each level answers, as Confluent
documents it (Avro's resolution rules; Confluent's JSON Schema and Protobuf rules)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.model import Compatibility, SchemaType
from moldau.registry.schema_types import parse
from moldau.registry.schemas import compatibility_errors

B, F, FULL = Compatibility.BACKWARD, Compatibility.FORWARD, Compatibility.FULL


def record(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": list(fields)})


ID = {"name": "id", "type": "string"}
AVRO_EVOLUTIONS = {
    # name: (old, new, (backward ok, forward ok))
    "field added with a default": (
        record(ID),
        record(ID, {"name": "qty", "type": "int", "default": 1}),
        (True, True),
    ),
    "field added without a default": (
        record(ID),
        record(ID, {"name": "qty", "type": "int"}),
        (False, True),
    ),
    "field with a default removed": (
        record(ID, {"name": "qty", "type": "int", "default": 1}),
        record(ID),
        (True, True),
    ),
    "field without a default removed": (
        record(ID, {"name": "qty", "type": "int"}),
        record(ID),
        (True, False),
    ),
    "int widened to long": (
        record({"name": "qty", "type": "int"}),
        record({"name": "qty", "type": "long"}),
        (True, False),
    ),
    "string changed to int": (
        record({"name": "qty", "type": "string"}),
        record({"name": "qty", "type": "int"}),
        (False, False),
    ),
    "enum symbol added": (
        record({"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["A"]}}),
        record({"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["A", "B"]}}),
        (True, False),
    ),
    "type made nullable": (
        record({"name": "note", "type": "string"}),
        record({"name": "note", "type": ["null", "string"], "default": None}),
        (True, False),
    ),
    "field renamed with an alias": (
        record({"name": "qty", "type": "int"}),
        record({"name": "quantity", "aliases": ["qty"], "type": "int"}),
        (True, False),
    ),
    "record renamed": (
        record(ID),
        json.dumps({"type": "record", "name": "Purchase", "fields": [ID]}),
        (False, False),
    ),
}

CLOSED = {"additionalProperties": False}
JSON_EVOLUTIONS = {
    "optional property added to a closed model": (
        {"type": "object", "properties": {"a": {"type": "string"}}, **CLOSED},
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            **CLOSED,
        },
        (True, False),
    ),
    "property added to an open model": (
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
        (False, True),
    ),
    "integer widened to number": (
        {"type": "object", "properties": {"n": {"type": "integer"}}},
        {"type": "object", "properties": {"n": {"type": "number"}}},
        (True, False),
    ),
    "required property added": (
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        (False, True),
    ),
    "enum value added": (
        {"type": "string", "enum": ["A"]},
        {"type": "string", "enum": ["A", "B"]},
        (True, False),
    ),
    "maxLength decreased": (
        {"type": "string", "maxLength": 10},
        {"type": "string", "maxLength": 5},
        (False, True),
    ),
    "oneOf branch added": (
        {"oneOf": [{"type": "string"}]},
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        (True, False),
    ),
}

PROTO = 'syntax = "proto3";\npackage shop;\n'
PROTOBUF_EVOLUTIONS = {
    "field added": (
        PROTO + "message Order { string id = 1; }",
        PROTO + "message Order { string id = 1; int32 qty = 2; }",
        (True, True),
    ),
    "field removed": (
        PROTO + "message Order { string id = 1; int32 qty = 2; }",
        PROTO + "message Order { string id = 1; }",
        (True, True),
    ),
    "int32 to int64 (same wire type)": (
        PROTO + "message Order { int32 qty = 1; }",
        PROTO + "message Order { int64 qty = 1; }",
        (True, True),
    ),
    "int32 to string": (
        PROTO + "message Order { int32 qty = 1; }",
        PROTO + "message Order { string qty = 1; }",
        (False, False),
    ),
    "message removed": (
        PROTO + "message Order { string id = 1; }\nmessage Line { string sku = 1; }",
        PROTO + "message Order { string id = 1; }",
        (False, True),
    ),
    "package renamed": (
        PROTO + "message Order { string id = 1; }",
        'syntax = "proto3";\npackage store;\nmessage Order { string id = 1; }',
        (False, False),
    ),
    "two fields moved into a new oneof": (
        PROTO + "message Order { string card = 1; string iban = 2; }",
        PROTO + "message Order { oneof pay { string card = 1; string iban = 2; } }",
        (False, True),
    ),
}


def _matrix(schema_type: SchemaType, evolutions: dict[str, Any]) -> list[Any]:
    return [
        pytest.param(schema_type, old, new, expected, id=f"{schema_type.value}: {name}")
        for name, (old, new, expected) in evolutions.items()
    ]


@pytest.mark.parametrize(
    ("schema_type", "old", "new", "expected"),
    _matrix(SchemaType.AVRO, AVRO_EVOLUTIONS)
    + _matrix(SchemaType.JSON, JSON_EVOLUTIONS)
    + _matrix(SchemaType.PROTOBUF, PROTOBUF_EVOLUTIONS),
)
def test_each_level_accepts_or_rejects_as_documented(
    schema_type: SchemaType, old: Any, new: Any, expected: tuple[bool, bool]
) -> None:
    def text(schema: Any) -> str:
        return schema if isinstance(schema, str) else json.dumps(schema)

    before, after = parse(schema_type, text(old)), parse(schema_type, text(new))
    backward, forward = expected
    answers = {
        level: not compatibility_errors(level, after, [before])
        for level in (B, F, FULL, Compatibility.NONE)
    }
    assert answers == {
        B: backward,
        F: forward,
        FULL: backward and forward,
        Compatibility.NONE: True,
    }


def test_transitive_levels_check_every_earlier_version() -> None:
    v1 = parse(SchemaType.AVRO, record(ID))
    v2 = parse(SchemaType.AVRO, record(ID, {"name": "qty", "type": "int", "default": 1}))
    v3 = parse(SchemaType.AVRO, record(ID, {"name": "qty", "type": "int"}))
    assert compatibility_errors(Compatibility.BACKWARD, v3, [v1, v2]) == []
    errors = compatibility_errors(Compatibility.BACKWARD_TRANSITIVE, v3, [v1, v2])
    assert errors == ["READER_FIELD_MISSING_DEFAULT_VALUE: qty at /fields/1"]


def test_recursive_avro_types_are_checked_without_looping() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}],
    }
    grown = {**node, "fields": [*node["fields"], {"name": "v", "type": "int", "default": 0}]}
    assert (
        compatibility_errors(
            FULL,
            parse(SchemaType.AVRO, json.dumps(grown)),
            [parse(SchemaType.AVRO, json.dumps(node))],
        )
        == []
    )


def test_protobuf_text_and_serialized_descriptors_are_one_schema() -> None:
    import base64

    text = PROTO + "message Order {\n  string id = 1;\n  map<string, int32> tags = 2;\n}"
    parsed = parse(SchemaType.PROTOBUF, text)
    serialized = parsed.serialized()  # type: ignore[attr-defined]
    assert base64.b64decode(serialized)
    again = parse(SchemaType.PROTOBUF, serialized)
    assert again.canonical() == parsed.canonical()
    assert "map<string, int32> tags = 2;" in parsed.canonical()


@pytest.mark.parametrize(
    "text",
    [
        "message {",
        'syntax = "proto3"; message A { Missing b = 1; }',
        'syntax = "proto3"; message A { string a = 1; string b = 1; }',
        'syntax = "proto3"; import "elsewhere.proto"; message A { string a = 1; }',
    ],
)
def test_invalid_protobuf_schemas_are_refused(text: str) -> None:
    from moldau.registry.errors import RegistryError

    with pytest.raises(RegistryError) as refused:
        parse(SchemaType.PROTOBUF, text)
    assert refused.value.error_code == 42201
