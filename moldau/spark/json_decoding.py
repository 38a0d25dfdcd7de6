"""JSON Schema payloads into one Arrow column.

`json_spark_type(schema)` is the Spark type of the documents a JSON schema describes: objects
with `properties` are structs (in the order of their properties), objects with only
`additionalProperties` maps, `items` arrays, `integer` long, `number` double; `$ref`s are
followed (within the document and into referenced schemas), a union with null is its other
branch. What has no one Spark type (a union of two types, an object without properties, `{}`,
recursion) is refused with `UnsupportedSchema` naming the place.

Decoding does not validate documents against the schema (the producer's serializer did); it
reads them into the column's type, and a document that does not fit is bad. When the column is
a struct without maps and every payload is one line starting with `{`, Arrow's JSON reader
parses all of a group's documents in one call (newline-delimited, in C); otherwise, and when
that fails, `json.loads` reads them one by one and pyarrow builds the column.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
)

from moldau.registry.json_schema import JsonSchema
from moldau.registry.schemas import ParsedSchema
from moldau.spark.avro_types import UnsupportedSchema, spark_arrow_type
from moldau.spark.decoded import Decoded, describe
from moldau.spark.framing import Payloads

__all__ = ["JsonColumnDecoder", "json_spark_type"]

_OPEN_BRACE: Final = pa.scalar(ord("{"), pa.uint8())
_SIMPLE: Final[Mapping[str, DataType]] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
    "null": NullType(),
}


def json_spark_type(schema: JsonSchema) -> DataType:
    return _JsonTypes(schema).type_of(schema.document, schema.document, "#", frozenset())


class _JsonTypes:
    def __init__(self, schema: JsonSchema) -> None:
        self.resources = schema.resources

    def type_of(self, node: Any, document: Any, path: str, refs: frozenset[str]) -> DataType:
        if not isinstance(node, dict) or not node:
            raise UnsupportedSchema(f"at {path}: any value is allowed, which no Spark type holds")
        if "$ref" in node:
            return self._reference(str(node["$ref"]), document, path, refs)
        for keyword in ("oneOf", "anyOf"):
            if keyword in node:
                return self._union(node[keyword], document, f"{path}/{keyword}", refs)
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            return self.type_of(node["allOf"][0], document, f"{path}/allOf/0", refs)
        if "const" in node:
            return self._of_values([node["const"]], path)
        if "enum" in node and "type" not in node:
            return self._of_values(list(node["enum"]), path)
        declared = node.get("type")
        names = [declared] if isinstance(declared, str) else list(declared or [])
        names = [name for name in names if name != "null"] or (["null"] if names else [])
        if not names:
            names = ["object"] if "properties" in node else ["array"] if "items" in node else []
        if set(names) == {"integer", "number"}:
            names = ["number"]
        if len(names) != 1:
            raise UnsupportedSchema(
                f"at {path}: " + (f"types {names}" if names else "no type") + "; a Spark column "
                "holds one type (null aside)"
            )
        name = str(names[0])
        if name == "object":
            return self._object(node, document, path, refs)
        if name == "array":
            items = node.get("items")
            if not isinstance(items, dict):
                raise UnsupportedSchema(f"at {path}: an array without one schema for its items")
            return ArrayType(self.type_of(items, document, f"{path}/items", refs))
        if name not in _SIMPLE:
            raise UnsupportedSchema(f"at {path}: unknown type {name!r}")
        return _SIMPLE[name]

    def _object(self, node: Any, document: Any, path: str, refs: frozenset[str]) -> DataType:
        properties = node.get("properties")
        if isinstance(properties, dict) and properties:
            return StructType(
                [
                    StructField(
                        str(name),
                        self.type_of(value, document, f"{path}/properties/{name}", refs),
                    )
                    for name, value in properties.items()
                ]
            )
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            values = self.type_of(extra, document, f"{path}/additionalProperties", refs)
            return MapType(StringType(), values)
        raise UnsupportedSchema(
            f"at {path}: an object without properties (nor one schema for additionalProperties)"
        )

    def _union(self, branches: Any, document: Any, path: str, refs: frozenset[str]) -> DataType:
        others = [
            (index, branch)
            for index, branch in enumerate(branches or [])
            if not (isinstance(branch, dict) and branch.get("type") == "null")
        ]
        if len(others) != 1:
            raise UnsupportedSchema(
                f"at {path}: {len(others)} alternatives besides null; a Spark column holds one"
            )
        index, branch = others[0]
        return self.type_of(branch, document, f"{path}/{index}", refs)

    def _of_values(self, values: list[Any], path: str) -> DataType:
        kinds = {type(value) for value in values if value is not None}
        for kinds_of, spark in (
            ({str}, StringType()),
            ({bool}, BooleanType()),
            ({int}, LongType()),
            ({int, float}, DoubleType()),
            ({float}, DoubleType()),
        ):
            if kinds == kinds_of:
                return spark
        raise UnsupportedSchema(f"at {path}: values of several types ({sorted(map(str, kinds))})")

    def _reference(self, ref: str, document: Any, path: str, refs: frozenset[str]) -> DataType:
        where, _hash, pointer = ref.partition("#")
        target = document
        if where:
            if where not in self.resources:
                raise UnsupportedSchema(f"at {path}: $ref {ref!r} names no referenced schema")
            target = self.resources[where]
        key = f"{where}#{pointer}" if where else f"{id(document)}#{pointer}"
        if key in refs:
            raise UnsupportedSchema(f"at {path}: $ref {ref!r} is recursive, a Spark column is not")
        node = target
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise UnsupportedSchema(f"at {path}: $ref {ref!r} points at nothing")
        return self.type_of(node, target, f"{path}/$ref", refs | {key})


class JsonColumnDecoder:
    """One column's JSON schema: its Spark type, and reading documents into it."""

    def __init__(self, reader: ParsedSchema, *, description: str) -> None:
        if not isinstance(reader, JsonSchema):
            raise ValueError(f"{description} is a {reader.schema_type} schema, not JSON")
        self.description = description
        self.spark_type = json_spark_type(reader)
        self.arrow_type = spark_arrow_type(self.spark_type)
        self._struct_schema = (
            pa.schema(list(self.arrow_type))
            if isinstance(self.arrow_type, pa.StructType) and not _has_map(self.arrow_type)
            else None
        )

    def decode(
        self, writer_id: int, writer: ParsedSchema, payloads: Payloads, data: bytes
    ) -> Decoded:
        if not isinstance(writer, JsonSchema):
            return Decoded.all_bad(
                self.arrow_type,
                len(payloads),
                f"schema id {writer_id} is a {writer.schema_type} schema, not JSON",
            )
        documents = payloads.as_bytes(data)
        if self._struct_schema is not None and _one_object_per_line(payloads, data):
            column = self._read_lines(documents)
            if column is not None:
                return Decoded(column)
        return self._read_each(documents, writer_id)

    def _read_lines(self, documents: list[bytes]) -> pa.Array | None:
        """All documents read by Arrow's JSON reader, or None when one of them does not fit
        (then each is read on its own, to find which)."""
        lines = b"\n".join(documents)
        if lines.count(b"\n") != len(documents) - 1 or b"\r" in lines:
            return None
        try:
            table = pa_json.read_json(
                io.BytesIO(lines),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=len(lines) + 1),
                parse_options=pa_json.ParseOptions(
                    explicit_schema=self._struct_schema, unexpected_field_behavior="ignore"
                ),
            )
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != len(documents):  # a line held two documents
            return None
        return pa.StructArray.from_arrays(
            [column.combine_chunks() for column in table.columns], fields=list(self.arrow_type)
        )

    def _read_each(self, documents: list[bytes], writer_id: int) -> Decoded:
        rows: list[Any] = []
        bad: list[bool] = []
        reason = ""
        for document in documents:
            try:
                rows.append(json.loads(document))
                bad.append(False)
            except ValueError as error:
                reason = reason or f"not JSON (schema id {writer_id}): {describe(error)}"
                rows.append(None)
                bad.append(True)
        return Decoded.from_rows(rows, bad, reason, self.arrow_type)


def _one_object_per_line(payloads: Payloads, data: bytes) -> bool:
    """Whether every payload starts with `{` (Arrow's JSON reader expects objects; it is not
    given anything else)."""
    if len(payloads) == 0 or not data:
        return False
    data_bytes = pa.Array.from_buffers(pa.uint8(), payloads.data.size, [None, payloads.data])
    starts = pc.min_element_wise(payloads.starts, pa.scalar(payloads.data.size - 1, pa.int64()))
    first = pc.take(data_bytes, starts)
    nonempty = pc.greater(pc.subtract(payloads.ends, payloads.starts), pa.scalar(0, pa.int64()))
    return bool(pc.all(pc.and_(nonempty, pc.equal(first, _OPEN_BRACE))).as_py())


def _has_map(kind: pa.DataType) -> bool:
    if isinstance(kind, pa.MapType):
        return True
    if isinstance(kind, pa.StructType):
        return any(_has_map(field.type) for field in kind)
    if isinstance(kind, pa.ListType):
        return _has_map(kind.value_type)
    return False
