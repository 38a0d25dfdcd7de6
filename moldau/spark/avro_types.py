"""Avro schemas as Spark columns, and Spark columns as Avro schemas.

`avro_type(parsed, named)` turns a schema as the registry parsed it (fastavro's form: full
names, named types referenced by name) into a tree of `AvroType`s; `spark_type` gives the column
type Spark's `from_avro` would (every field nullable), `arrow_type` the Arrow type decoded
values are built in (timestamps still in their own unit: one cast makes them Spark's). For the
sink, `avro_schema_of(spark_type)` is the Avro schema of a column, as Spark's `to_avro` derives
it. `fastavro_schema` is the schema fastavro reads and writes with: logical types other than
decimal left out, so that dates and timestamps stay numbers instead of Python objects.

What a Spark column cannot hold is refused with `UnsupportedSchema` naming the place: a
recursive type, a union of more than one non-null type, a map whose keys are not strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = [
    "AvroField",
    "AvroType",
    "UnsupportedSchema",
    "arrow_type",
    "avro_schema_of",
    "avro_type",
    "fastavro_schema",
    "spark_arrow_type",
    "spark_type",
]

PRIMITIVES: Final = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)
MAX_DECIMAL_PRECISION: Final = 38  # Spark's DecimalType
# Logical types with a Spark type of their own, by the Avro type they annotate; any other is
# read as its underlying type (time-millis as int, uuid as string, ...), as Spark does.
_LOGICAL: Final[Mapping[str, frozenset[str]]] = {
    "int": frozenset({"date"}),
    "long": frozenset(
        {
            "timestamp-millis",
            "timestamp-micros",
            "local-timestamp-millis",
            "local-timestamp-micros",
        }
    ),
    "bytes": frozenset({"decimal"}),
    "fixed": frozenset({"decimal"}),
}
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UnsupportedSchema(ValueError):
    """A schema (or a Spark type) the other side has no form for."""


@dataclass(frozen=True, slots=True)
class AvroField:
    name: str
    type: AvroType
    aliases: tuple[str, ...] = ()
    has_default: bool = False
    default: Any = None


@dataclass(frozen=True, slots=True)
class AvroType:
    """One Avro type; a union of null and one type is that type with `nullable` set."""

    kind: str  # a primitive's name, or record, enum, array, map, fixed
    nullable: bool = False
    null_index: int = 0  # null's branch in the union (0 or 1)
    name: str = ""  # the full name of a record, enum or fixed
    aliases: tuple[str, ...] = ()  # unqualified
    fields: tuple[AvroField, ...] = ()
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    items: AvroType | None = None  # an array's items, a map's values
    size: int = 0  # of a fixed
    logical: str = ""  # date, timestamp-*, local-timestamp-*, decimal
    precision: int = 0
    scale: int = 0

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def element(self) -> AvroType:
        assert self.items is not None, f"{self.kind} has no items"
        return self.items


def avro_type(schema: Any, named: Mapping[str, Any]) -> AvroType:
    """The tree of a parsed schema; `named` holds every named type by full name."""
    return _Builder(named).build(schema, "", frozenset())


class _Builder:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named

    def build(self, schema: Any, path: str, enclosing: frozenset[str]) -> AvroType:
        if isinstance(schema, list):
            return self._union(schema, path, enclosing)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return AvroType(schema)
            if schema in enclosing:
                raise UnsupportedSchema(
                    f"{_where(path)}: the type {schema} contains itself, and a Spark column "
                    "cannot be recursive"
                )
            if schema not in self.named:
                raise UnsupportedSchema(f"{_where(path)}: unknown type {schema!r}")
            return self.build(self.named[schema], path, enclosing)
        kind = str(schema["type"])
        if kind in PRIMITIVES:
            return self._primitive(kind, schema, path)
        name = str(schema.get("name", ""))
        aliases = tuple(str(a).rsplit(".", 1)[-1] for a in schema.get("aliases") or ())
        if kind in ("record", "error"):
            inner = enclosing | {name}
            fields = tuple(
                AvroField(
                    name=str(field["name"]),
                    type=self.build(field["type"], f"{path}.{field['name']}", inner),
                    aliases=tuple(str(a) for a in field.get("aliases") or ()),
                    has_default="default" in field,
                    default=field.get("default"),
                )
                for field in schema["fields"]
            )
            return AvroType("record", name=name, aliases=aliases, fields=fields)
        if kind == "enum":
            default = schema.get("default")
            return AvroType(
                "enum",
                name=name,
                aliases=aliases,
                symbols=tuple(str(s) for s in schema["symbols"]),
                enum_default=None if default is None else str(default),
            )
        if kind == "array":
            return AvroType("array", items=self.build(schema["items"], f"{path}[]", enclosing))
        if kind == "map":
            return AvroType("map", items=self.build(schema["values"], f"{path}{{}}", enclosing))
        if kind == "fixed":
            fixed = AvroType("fixed", name=name, aliases=aliases, size=int(schema["size"]))
            return self._logical(fixed, schema, path)
        raise UnsupportedSchema(f"{_where(path)}: unknown type {kind!r}")

    def _primitive(self, kind: str, schema: Mapping[str, Any], path: str) -> AvroType:
        return self._logical(AvroType(kind), schema, path)

    def _logical(self, base: AvroType, schema: Mapping[str, Any], path: str) -> AvroType:
        logical = str(schema.get("logicalType", ""))
        if logical not in _LOGICAL.get(base.kind, ()):
            return base
        if logical != "decimal":
            return _replace(base, logical=logical)
        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        if not 0 < precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            return base  # not a decimal Spark can hold: its bytes, as Avro says to read it
        return _replace(base, logical=logical, precision=precision, scale=scale)

    def _union(self, branches: list[Any], path: str, enclosing: frozenset[str]) -> AvroType:
        others = [(index, b) for index, b in enumerate(branches) if b != "null"]
        if not others:
            return AvroType("null")
        if len(others) > 1:
            raise UnsupportedSchema(
                f"{_where(path)}: a union of {len(others)} types other than null "
                f"({', '.join(_type_name(b) for _i, b in others)}); Spark columns read unions "
                "of null and one type only"
            )
        index, branch = others[0]
        found = self.build(branch, path, enclosing)
        if len(branches) == 1:
            return found
        return _replace(found, nullable=True, null_index=1 - index)


def _replace(base: AvroType, **changes: Any) -> AvroType:
    values = {name: getattr(base, name) for name in AvroType.__dataclass_fields__}
    values.update(changes)
    return AvroType(**values)


def _where(path: str) -> str:
    return f"at {path.lstrip('.')}" if path else "at the top"


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return "union"


# --- Spark and Arrow types ---------------------------------------------------------------------

_SPARK_PRIMITIVES: Final[Mapping[str, DataType]] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
    "enum": StringType(),
    "fixed": BinaryType(),
}
_SPARK_LOGICAL: Final[Mapping[str, DataType]] = {
    "date": DateType(),
    "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(),
}
_ARROW_PRIMITIVES: Final[Mapping[str, pa.DataType]] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
    "enum": pa.string(),
    "fixed": pa.binary(),
}
_ARROW_LOGICAL: Final[Mapping[str, pa.DataType]] = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
}


def spark_type(avro: AvroType) -> DataType:
    """The Spark type of an Avro type (Spark's `SchemaConverters`, every field nullable)."""
    if avro.logical == "decimal":
        return DecimalType(avro.precision, avro.scale)
    if avro.logical:
        return _SPARK_LOGICAL[avro.logical]
    if avro.kind == "record":
        return StructType([StructField(f.name, spark_type(f.type)) for f in avro.fields])
    if avro.kind == "array":
        return ArrayType(spark_type(avro.element))
    if avro.kind == "map":
        return MapType(StringType(), spark_type(avro.element))
    return _SPARK_PRIMITIVES[avro.kind]


def arrow_type(avro: AvroType) -> pa.DataType:
    """The Arrow type values of `avro` are decoded into: Spark's, but for timestamps in
    milliseconds (`cast` to `spark_arrow_type` turns them into microseconds)."""
    if avro.logical == "decimal":
        return pa.decimal128(avro.precision, avro.scale)
    if avro.logical:
        return _ARROW_LOGICAL[avro.logical]
    if avro.kind == "record":
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in avro.fields])
    if avro.kind == "array":
        return pa.list_(pa.field("element", arrow_type(avro.element)))
    if avro.kind == "map":
        return pa.map_(pa.string(), arrow_type(avro.element))
    return _ARROW_PRIMITIVES[avro.kind]


def spark_arrow_type(spark: DataType) -> pa.DataType:
    """The Arrow type Spark expects of a Python data source's column of type `spark`."""
    return to_arrow_type(spark, timezone="UTC")


# --- fastavro's reading and writing schema -----------------------------------------------------


def fastavro_schema(schema: Any) -> Any:
    """`schema` (a document, or fastavro's parsed form) without the logical types that make
    fastavro build Python dates, datetimes and UUIDs: their numbers and strings are read and
    written as they are, and Arrow gives them their types. Decimals keep theirs."""
    if isinstance(schema, list):
        return [fastavro_schema(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    stripped = {}
    for key, value in schema.items():
        if key == "logicalType" and value != "decimal":
            continue
        if key == "fields":
            value = [{**field, "type": fastavro_schema(field["type"])} for field in value]
        elif key in ("type", "items", "values"):
            value = fastavro_schema(value)
        stripped[key] = value
    return stripped


# --- the sink: Spark types as Avro schemas -----------------------------------------------------


def avro_schema_of(column: DataType, *, name: str, namespace: str = "") -> Any:
    """The Avro schema of a Spark column (`to_avro`'s mapping): a struct is a record called
    `name` in `namespace`, its nested structs records named after their fields in namespaces
    that follow the path; a nullable field is a union with null first, defaulting to null (so
    that a later version may drop it). Dates, timestamps and decimals keep their logical types."""
    return _avro_of(column, name=name, namespace=namespace, path=name)


def _avro_of(column: DataType, *, name: str, namespace: str, path: str) -> Any:
    if isinstance(column, StructType):
        nested = f"{namespace}.{name}" if namespace else name
        fields = []
        for field in column.fields:
            if not _AVRO_NAME.fullmatch(field.name):
                raise UnsupportedSchema(
                    f"field {path}.{field.name}: {field.name!r} is not an Avro name (letters, "
                    "digits and _, not starting with a digit); rename the column"
                )
            inner = _avro_of(
                field.dataType, name=field.name, namespace=nested, path=f"{path}.{field.name}"
            )
            if field.nullable:
                fields.append({"name": field.name, "type": ["null", inner], "default": None})
            else:
                fields.append({"name": field.name, "type": inner})
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        record["fields"] = fields
        return record
    if isinstance(column, ArrayType):
        items = _avro_of(column.elementType, name=name, namespace=namespace, path=f"{path}[]")
        return {"type": "array", "items": ["null", items] if column.containsNull else items}
    if isinstance(column, MapType):
        if not isinstance(column.keyType, StringType):
            raise UnsupportedSchema(f"{path}: Avro maps have string keys, not {column.keyType}")
        values = _avro_of(column.valueType, name=name, namespace=namespace, path=f"{path}{{}}")
        return {"type": "map", "values": ["null", values] if column.valueContainsNull else values}
    if isinstance(column, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": column.precision,
            "scale": column.scale,
        }
    for spark, avro in _AVRO_OF_SPARK:
        if isinstance(column, spark):
            return avro
    raise UnsupportedSchema(f"{path}: no Avro type for Spark's {column.simpleString()}")


_AVRO_OF_SPARK: Final[tuple[tuple[type[DataType], Any], ...]] = (
    (BooleanType, "boolean"),
    (ByteType, "int"),
    (ShortType, "int"),
    (IntegerType, "int"),
    (LongType, "long"),
    (FloatType, "float"),
    (DoubleType, "double"),
    (StringType, "string"),
    (BinaryType, "bytes"),
    (DateType, {"type": "int", "logicalType": "date"}),
    (TimestampType, {"type": "long", "logicalType": "timestamp-micros"}),
    (TimestampNTZType, {"type": "long", "logicalType": "local-timestamp-micros"}),
    (NullType, "null"),
)
