"""Registered schemas as Spark column types (Avro and JSON Schema), and Spark columns as Avro
schemas for the sink: the mapping, what is refused and why, and the Arrow types Spark expects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from moldau.registry.avro import AvroSchema
from moldau.registry.json_schema import JsonSchema
from moldau.registry.model import SchemaReference, SchemaType, StoredSchema
from moldau.registry.schema_types import parse
from moldau.spark.avro_types import (
    UnsupportedSchema,
    arrow_type,
    avro_schema_of,
    avro_type,
    fastavro_schema,
    spark_arrow_type,
    spark_type,
)
from moldau.spark.json_decoding import json_spark_type

from .registry_records import avro, json_schema


def spark_of(document: Any) -> str:
    schema = avro(document)
    assert isinstance(schema, AvroSchema)
    return spark_type(avro_type(schema.parsed, schema.named)).simpleString()


def json_spark_of(document: Any) -> str:
    schema = json_schema(document)
    assert isinstance(schema, JsonSchema)
    return json_spark_type(schema).simpleString()


def test_avro_types_map_to_sparks_from_avro_types_every_field_nullable() -> None:
    document = {
        "type": "record",
        "name": "All",
        "namespace": "x",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "by", "type": "bytes"},
            {"name": "s", "type": "string"},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
            {"name": "a", "type": {"type": "array", "items": ["null", "int"]}},
            {"name": "m", "type": {"type": "map", "values": "E"}},
            {"name": "n", "type": ["null", "F"]},
            {"name": "r", "type": {"type": "record", "name": "R", "fields": []}},
            {"name": "date", "type": {"type": "int", "logicalType": "date"}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "tu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {
                "name": "dec",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
        ],
    }
    assert spark_of(document) == (
        "struct<b:boolean,i:int,l:bigint,f:float,d:double,by:binary,s:string,e:string,"
        "fx:binary,a:array<int>,m:map<string,string>,n:binary,r:struct<>,date:date,"
        "ts:timestamp,tu:timestamp,lt:timestamp_ntz,t:int,u:string,dec:decimal(9,2)>"
    )
    parsed = avro(document)
    assert isinstance(parsed, AvroSchema)
    tree = avro_type(parsed.parsed, parsed.named)
    # the decoded Arrow type casts to the one Spark expects (milliseconds to microseconds)
    assert arrow_type(tree).field("ts").type.unit == "ms"
    assert spark_arrow_type(spark_type(tree)).field("ts").type.unit == "us"


def test_named_types_from_references_are_resolved() -> None:
    address = {"type": "record", "name": "Address", "namespace": "shop",
               "fields": [{"name": "city", "type": "string"}]}  # fmt: skip
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "ship_to", "type": "Address"}]}  # fmt: skip
    stored = StoredSchema(schema_id=1, schema_type=SchemaType.AVRO, text=json.dumps(address))
    parsed = parse(
        SchemaType.AVRO,
        json.dumps(order),
        [SchemaReference(name="shop.Address", subject="address", version=1)],
        lambda _reference: stored,
    )
    assert isinstance(parsed, AvroSchema)
    tree = avro_type(parsed.parsed, parsed.named)
    assert spark_type(tree).simpleString() == "struct<ship_to:struct<city:string>>"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {
                "type": "record",
                "name": "Node",
                "fields": [{"name": "next", "type": ["null", "Node"]}],
            },
            "at next: the type Node contains itself",
        ),
        (
            {
                "type": "record",
                "name": "U",
                "fields": [{"name": "u", "type": ["null", "int", "string"]}],
            },
            "at u: a union of 2 types other than null",
        ),
    ],
)
def test_avro_schemas_a_spark_column_cannot_hold_are_refused(document: Any, message: str) -> None:
    with pytest.raises(UnsupportedSchema, match=message):
        spark_of(document)


def test_fastavro_reads_dates_and_timestamps_as_numbers_and_decimals_as_decimals() -> None:
    document = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "a",
                "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}},
            },
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4}},
        ],
    }
    stripped = fastavro_schema(document)
    assert stripped["fields"][0]["type"] == {"type": "long"}
    assert stripped["fields"][1]["type"] == {"type": "array", "items": {"type": "int"}}
    assert stripped["fields"][2]["type"]["logicalType"] == "decimal"


def struct(**fields: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields.items()])


@pytest.mark.parametrize(
    "column",
    [
        struct(
            id=LongType(),
            name=StringType(),
            tags=ArrayType(StringType()),
            attributes=MapType(StringType(), IntegerType()),
            address=struct(city=StringType(), zip=IntegerType()),
            paid=BooleanType(),
            amount=DoubleType(),
            ratio=FloatType(),
            day=DateType(),
            at=TimestampType(),
            local=TimestampNTZType(),
            price=DecimalType(10, 2),
            raw=BinaryType(),
        ),
        StringType(),
        ArrayType(struct(x=IntegerType())),
    ],
)
def test_spark_columns_give_avro_schemas_that_read_back_as_the_same_columns(
    column: DataType,
) -> None:
    document = avro_schema_of(column, name="topLevelRecord", namespace="shop")
    assert spark_of(document) == column.simpleString()
    if isinstance(column, StructType):
        assert document["name"] == "topLevelRecord" and document["namespace"] == "shop"
        first = document["fields"][0]
        assert first == {"name": "id", "type": ["null", "long"], "default": None}


def test_spark_columns_without_an_avro_form_are_refused() -> None:
    with pytest.raises(UnsupportedSchema, match="string keys"):
        avro_schema_of(MapType(IntegerType(), StringType()), name="r")
    with pytest.raises(UnsupportedSchema, match="'my field' is not an Avro name"):
        avro_schema_of(StructType([StructField("my field", IntegerType())]), name="r")


def test_json_schema_types_map_to_spark_types() -> None:
    document = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "format": "date-time"},
            "i": {"type": "integer"},
            "n": {"type": ["number", "null"]},
            "in": {"type": ["integer", "number"]},
            "b": {"type": "boolean"},
            "e": {"enum": ["a", "b"]},
            "c": {"const": 3},
            "a": {"type": "array", "items": {"$ref": "#/$defs/point"}},
            "o": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/point"}]},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "$defs": {
            "point": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
    }
    assert json_spark_of(document) == (
        "struct<s:string,i:bigint,n:double,in:double,b:boolean,e:string,c:bigint,"
        "a:array<struct<x:double>>,o:struct<x:double>,m:map<string,bigint>>"
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"type": "object", "properties": {"any": {}}}, "at #/properties/any: any value"),
        ({"type": "object"}, "at #: an object without properties"),
        (
            {"type": "object", "properties": {"v": {"type": ["string", "integer"]}}},
            "types \\['string', 'integer'\\]",
        ),
        (
            {"type": "object", "properties": {"next": {"$ref": "#"}}},
            "is recursive",
        ),
    ],
)
def test_json_schemas_a_spark_column_cannot_hold_are_refused(document: Any, message: str) -> None:
    with pytest.raises(UnsupportedSchema, match=message):
        json_spark_of(document)
