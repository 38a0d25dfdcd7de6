"""Shared pieces of the unit tests of registry-framed columns: schemas parsed as the registry
parses them, a lookup without a registry, framed Avro and JSON records, and source batches."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa

from moldau.registry.model import SchemaType
from moldau.registry.schema_types import parse
from moldau.registry.schemas import ParsedSchema
from moldau.spark.framing import frame_header
from moldau.spark.registry_lookup import UnknownSchema
from moldau.spark.schema import arrow_schema

ORDER_V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
# v2 (BACKWARD compatible): quantity promoted to long, a field added with a default
ORDER_V2: dict[str, Any] = {
    **ORDER_V1,
    "fields": [
        *(
            {**field, "type": "long"} if field["name"] == "quantity" else field
            for field in ORDER_V1["fields"]
        ),
        {"name": "channel", "type": "string", "default": "web"},
    ],
}


def avro(document: Any) -> ParsedSchema:
    return parse(SchemaType.AVRO, json.dumps(document))


def json_schema(document: Any) -> ParsedSchema:
    return parse(SchemaType.JSON, json.dumps(document))


class FakeLookup:
    """Schemas by id, as a registry would answer them; counts the ids asked for."""

    def __init__(self, schemas: Mapping[int, ParsedSchema]) -> None:
        self.schemas = dict(schemas)
        self.asked: list[int] = []

    def parsed(self, schema_id: int) -> ParsedSchema:
        self.asked.append(schema_id)
        if schema_id not in self.schemas:
            raise UnknownSchema(f"schema id {schema_id} is not in the registry")
        return self.schemas[schema_id]


def avro_record(schema_id: int, document: Any, record: Mapping[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(document), dict(record))
    return frame_header(schema_id) + out.getvalue()


def json_record(schema_id: int, document: Any) -> bytes:
    return frame_header(schema_id) + json.dumps(document, separators=(",", ":")).encode()


def source_batch(
    values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None
) -> pa.RecordBatch:
    """A batch as the partition reader yields it: topic `t`, partition 0, offsets from 0."""
    count = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys if keys is not None else [None] * count, type=pa.binary()),
            pa.array(values, type=pa.binary()),
            pa.array(["t"] * count, type=pa.string()),
            pa.array([0] * count, type=pa.int32()),
            pa.array(range(count), type=pa.int64()),
            pa.array([0] * count, type=pa.timestamp("us", tz="UTC")),
            pa.array([0] * count, type=pa.int32()),
        ],
        schema=arrow_schema(),
    )
