"""JSON Schema: validation (jsonschema's meta-schemas), identity, and Confluent's documented
JSON Schema compatibility rules as a check that a reader accepts every document a writer does.

The rules follow Confluent's table: a closed content model (`additionalProperties: false`) may
gain optional properties and may not lose any; an open one may lose properties but a property
added to it must accept anything (old documents may carry it with any value); required
properties may not be added; types may widen (integer to number, a type added to a list) but not
narrow; enums may grow but not shrink; numeric and length bounds may loosen but not tighten;
`oneOf`/`anyOf` may gain branches but not lose them. `$ref`s are followed, within the schema
(`#/definitions/...`, `#/$defs/...`) and into referenced schemas by their reference name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from moldau.registry.errors import RegistryError
from moldau.registry.model import SchemaType
from moldau.registry.schemas import MAX_NESTING, load_json, of_type

__all__ = ["JsonSchema", "parse_json_schema"]

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
# (keyword, the reader may not have a larger value than the writer) bounds: a reader whose bound
# is tighter than the writer's (or that adds one) rejects documents the writer accepted.
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


@dataclass(slots=True)
class JsonSchema:
    document: Any
    resources: dict[str, Any] = field(default_factory=dict)  # reference name -> document
    schema_type: SchemaType = SchemaType.JSON

    def canonical(self) -> str:
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self.document, separators=(",", ":"), sort_keys=True)

    def read_errors(self, writer: Any) -> list[str]:
        assert isinstance(writer, JsonSchema)
        checker = _Acceptance(self, writer)
        checker.check(self.document, writer.document, "#")
        return checker.errors


def parse_json_schema(text: str, references: Sequence[Any]) -> JsonSchema:
    resources: dict[str, Any] = {}
    for reference in of_type(references, SchemaType.JSON):
        resources[reference.name] = _load(reference.schema.text, f"reference {reference.name!r}")
    return JsonSchema(document=_load(text, "schema"), resources=resources)


def _load(text: str, what: str) -> Any:
    document = load_json(text, what)
    if not isinstance(document, dict | bool):
        raise RegistryError.invalid_schema(f"the {what} is not a JSON object or boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as error:
        raise RegistryError.invalid_schema(f"{error.message} in the {what}") from None
    return document


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The types a schema allows (None: any)."""
    declared = schema.get("type")
    if declared is None:
        return None
    names = {declared} if isinstance(declared, str) else set(declared)
    if "number" in names:
        names.add("integer")
    return names


class _Acceptance:
    """Whether `reader` accepts every document `writer` accepts; `errors` says where not."""

    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.errors: list[str] = []
        self._assumed: set[tuple[int, int]] = set()

    def _fail(self, path: str, message: str) -> None:
        self.errors.append(f"{message} at {path}")

    def _deref(self, schema: Any, side: JsonSchema) -> Any:
        for _ in range(MAX_NESTING):
            if not isinstance(schema, dict) or "$ref" not in schema:
                return schema
            reference = str(schema["$ref"])
            target, _, pointer = reference.partition("#")
            document = side.document if not target else side.resources.get(target)
            if document is None:
                raise RegistryError.invalid_schema(f"unresolved $ref {reference!r}")
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(document, dict) or part not in document:
                    raise RegistryError.invalid_schema(f"unresolved $ref {reference!r}")
                document = document[part]
            schema = document
        raise RegistryError.invalid_schema("$ref chain too long")

    def accepts(self, reader: Any, writer: Any) -> bool:
        saved, assumed = len(self.errors), set(self._assumed)
        self.check(reader, writer, "#")
        ok = len(self.errors) == saved
        del self.errors[saved:]
        self._assumed = assumed
        return ok

    def check(self, reader: Any, writer: Any, path: str) -> None:
        # (recursion only happens through $ref, whose targets live as long as the documents)
        via_reference = any(isinstance(s, dict) and "$ref" in s for s in (reader, writer))
        reader = self._deref(reader, self.reader)
        writer = self._deref(writer, self.writer)
        if writer is False or reader is True or reader == {}:
            return
        if reader is False:
            self._fail(path, "SCHEMA_NARROWED: the new schema accepts nothing")
            return
        if writer is True:
            writer = {}
        pair = (id(reader), id(writer))
        if via_reference:
            if pair in self._assumed:
                return
            self._assumed.add(pair)
        if self._check_combined(reader, writer, path):
            return
        self._check_types(reader, writer, path)
        self._check_values(reader, writer, path)
        self._check_bounds(reader, writer, path)
        writer_types, reader_types = _types(writer), _types(reader)
        if (writer_types is None or "object" in writer_types) and (
            reader_types is None or "object" in reader_types
        ):
            self._check_object(reader, writer, path)
        if (writer_types is None or "array" in writer_types) and (
            reader_types is None or "array" in reader_types
        ):
            self._check_array(reader, writer, path)

    def _check_combined(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        """oneOf/anyOf/allOf; True when they decided the whole comparison."""
        for keyword in ("oneOf", "anyOf"):
            if keyword in writer:
                for index, branch in enumerate(writer[keyword]):
                    merged = {k: v for k, v in writer.items() if k != keyword}
                    merged = {**merged, **branch} if isinstance(branch, dict) else branch
                    self.check(reader, merged, f"{path}/{keyword}/{index}")
                return True
        for keyword in ("oneOf", "anyOf"):
            if keyword in reader:
                if not any(self.accepts(branch, writer) for branch in reader[keyword]):
                    self._fail(
                        path,
                        f"COMBINED_TYPE_SUBSCHEMAS_CHANGED: no {keyword} branch of "
                        "the new schema accepts what the old one did",
                    )
                return True
        if "allOf" in reader:
            for index, part in enumerate(reader["allOf"]):
                self.check(part, writer, f"{path}/allOf/{index}")
            return True
        if "allOf" in writer:
            combined: dict[str, Any] = {k: v for k, v in writer.items() if k != "allOf"}
            for part in writer["allOf"]:
                if isinstance(part, dict):
                    combined.update(self._deref(part, self.writer))
            self.check(reader, combined, path)
            return True
        return False

    def _check_types(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        reader_types, writer_types = _types(reader), _types(writer)
        if reader_types is None:
            return
        if writer_types is None:
            self._fail(path, f"TYPE_NARROWED: any type narrowed to {sorted(reader_types)}")
            return
        lost = writer_types - reader_types
        if lost:
            self._fail(path, f"TYPE_CHANGED: {sorted(lost)} no longer accepted")

    def _check_values(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if "enum" in reader:
            if "enum" not in writer:
                if "const" not in writer or writer["const"] not in reader["enum"]:
                    self._fail(path, "ENUM_ADDED: values restricted to an enum")
            elif any(value not in reader["enum"] for value in writer["enum"]):
                self._fail(path, "ENUM_ARRAY_NARROWED: enum values removed")
        if (
            "const" in reader
            and writer.get("const", object()) != reader["const"]
            and not ("enum" in writer and writer["enum"] == [reader["const"]])
        ):
            self._fail(path, "CONST_CHANGED: value restricted to another constant")
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            self._fail(path, "PATTERN_CHANGED: a pattern added or changed")
        if "multipleOf" in reader:
            factor, written = reader["multipleOf"], writer.get("multipleOf")
            if written is None or (written / factor) != int(written / factor):
                self._fail(path, "MULTIPLE_OF_CHANGED: values restricted to other multiples")

    def _check_bounds(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        for keyword in _LOWER_BOUNDS:
            if keyword in reader and not isinstance(reader[keyword], bool):
                if keyword not in writer:
                    self._fail(path, f"{keyword.upper()}_ADDED")
                elif reader[keyword] > writer[keyword]:
                    self._fail(path, f"{keyword.upper()}_INCREASED")
        for keyword in _UPPER_BOUNDS:
            if keyword in reader and not isinstance(reader[keyword], bool):
                if keyword not in writer:
                    self._fail(path, f"{keyword.upper()}_ADDED")
                elif reader[keyword] < writer[keyword]:
                    self._fail(path, f"{keyword.upper()}_DECREASED")
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            self._fail(path, "UNIQUE_ITEMS_ADDED")

    def _check_object(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        reader_properties = reader.get("properties", {})
        writer_properties = writer.get("properties", {})
        reader_extra = reader.get("additionalProperties", True)
        writer_extra = writer.get("additionalProperties", True)
        added_required = set(reader.get("required", ())) - set(writer.get("required", ()))
        for name in sorted(added_required):
            self._fail(f"{path}/required", f"REQUIRED_PROPERTY_ADDED: {name}")
        for name, writer_property in writer_properties.items():
            where = f"{path}/properties/{name}"
            if name in reader_properties:
                self.check(reader_properties[name], writer_property, where)
            elif reader_extra is False:
                self._fail(where, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                self.check(reader_extra, writer_property, where)
        for name, reader_property in reader_properties.items():
            if name in writer_properties or writer_extra is False:
                continue  # a closed writer never wrote it: adding it is safe
            where = f"{path}/properties/{name}"
            if writer_extra is True:
                if not self.accepts(reader_property, True):
                    self._fail(where, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                self.check(reader_property, writer_extra, where)
        if reader_extra is not True and writer_extra is not False:
            if reader_extra is False:
                self._fail(path, "ADDITIONAL_PROPERTIES_REMOVED")
            else:
                self.check(
                    reader_extra,
                    {} if writer_extra is True else writer_extra,
                    f"{path}/additionalProperties",
                )

    def _check_array(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        reader_items, writer_items = reader.get("items", True), writer.get("items", True)
        if isinstance(reader_items, list) or isinstance(writer_items, list):
            reader_list = reader_items if isinstance(reader_items, list) else []
            writer_list = writer_items if isinstance(writer_items, list) else []
            for index, item in enumerate(reader_list):
                written = writer_list[index] if index < len(writer_list) else True
                self.check(item, written, f"{path}/items/{index}")
            return
        self.check(reader_items, writer_items, f"{path}/items")
