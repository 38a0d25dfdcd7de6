"""The sink's `key`/`value` columns encoded in the schema registry's wire format (Avro).

On the driver, `register_writer_schemas` derives each encoded column's Avro schema from its Spark
type (`avro_schema_of`: a struct is a record named by `<column>.recordName`, nullable fields are
unions with null that default to null) and registers it under the column's subject, as
Confluent's serializers do with `auto.register.schemas` (the registry answers the same id for a
schema it already has, and refuses one its compatibility level does not allow). Tasks get the
id and the schema: nothing is asked of the registry per task.

In a task, `FramedEncoder.encode(batch)` replaces each encoded column by its framed bytes: the
column is cast so that dates and timestamps are numbers (no Python datetimes), turned into
Python values by Arrow, and fastavro writes every record after its 5-byte header into one
buffer, from which the binary column is made without copying. Null stays null (a tombstone).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructType

from moldau.registry.model import SchemaType
from moldau.spark.avro_types import UnsupportedSchema, avro_schema_of, fastavro_schema
from moldau.spark.decoded import describe
from moldau.spark.framing import frame_header
from moldau.spark.registry_lookup import SchemaLookup
from moldau.spark.registry_options import FramedColumn, RegistryOptions

__all__ = ["FramedEncoder", "WriterSchema", "encoded_batches", "register_writer_schemas"]


@dataclass(frozen=True)  # (no slots: the parsed schema is cached in the instance)
class WriterSchema:
    """An encoded column's registered schema (picklable: the text, parsed where it is used)."""

    column: FramedColumn
    schema_id: int
    text: str

    @cached_property
    def fastavro(self) -> Any:
        return fastavro.parse_schema(fastavro_schema(json.loads(self.text)))


def register_writer_schemas(
    options: RegistryOptions, schema: StructType
) -> tuple[WriterSchema, ...]:
    """Each encoded column's schema, registered under its subject (driver)."""
    types = {field.name.lower(): field.dataType for field in schema.fields}
    lookup = SchemaLookup(options.connection)
    writers = []
    for column in options.columns:
        if column.column not in types:
            continue  # an absent key: keys are null
        try:
            document = avro_schema_of(
                types[column.column],
                name=column.record_name,
                namespace=column.record_namespace,
            )
        except UnsupportedSchema as error:
            raise ValueError(f"option '{column.column}.format' is avro: {error}") from None
        text = json.dumps(document, separators=(",", ":"))
        schema_id = lookup.register(column.subject, text, SchemaType.AVRO)
        writers.append(WriterSchema(column, schema_id, text))
    return tuple(writers)


class FramedEncoder:
    def __init__(self, writers: Sequence[WriterSchema]) -> None:
        self.writers = list(writers)

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = [name.lower() for name in batch.schema.names]
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for writer in self.writers:
            index = names.index(writer.column.column)
            arrays[index] = encode_column(arrays[index], writer)
            fields[index] = pa.field(batch.schema.names[index], pa.binary())
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def encoded_batches(
    writers: Sequence[WriterSchema], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    if not writers:
        yield from batches
        return
    encoder = FramedEncoder(writers)
    for batch in batches:
        yield encoder.encode(batch)


def encode_column(column: pa.Array, writer: WriterSchema) -> pa.BinaryArray:
    """`column`'s values framed with the writer's id, null where they are null."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    plain = _plain_type(column.type)
    rows = (column if plain == column.type else column.cast(plain)).to_pylist(
        maps_as_pydicts="strict"
    )
    header = frame_header(writer.schema_id)
    schema = writer.fastavro
    write = fastavro.schemaless_writer
    out = io.BytesIO()
    ends = [0]
    for index, row in enumerate(rows):
        if row is not None:
            out.write(header)
            try:
                write(out, schema, row)
            except Exception as error:  # fastavro's errors have no common base
                raise ValueError(
                    f"row {index} of column {writer.column.column} does not fit its Avro schema "
                    f"(id {writer.schema_id}): {describe(error)}"
                ) from None
        ends.append(out.tell())
    validity = None
    if column.null_count:
        validity = pc.is_valid(column).buffers()[1]
    return pa.Array.from_buffers(
        pa.binary(),
        len(rows),
        [validity, pa.array(ends, type=pa.int32()).buffers()[1], pa.py_buffer(out.getvalue())],
    )


def _plain_type(kind: pa.DataType) -> pa.DataType:
    """`kind` with the types whose Python values fastavro would have to convert replaced by
    the numbers Avro stores, as the derived schema says: timestamps (Spark's, in microseconds,
    whatever their time zone) as int64, dates (days) as int32."""
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        return pa.int64()
    if pa.types.is_date32(kind):
        return pa.int32()
    if isinstance(kind, pa.StructType):
        return pa.struct([field.with_type(_plain_type(field.type)) for field in kind])
    if isinstance(kind, pa.ListType):
        return pa.list_(kind.value_field.with_type(_plain_type(kind.value_type)))
    if isinstance(kind, pa.MapType):
        return pa.map_(kind.key_type, kind.item_field.with_type(_plain_type(kind.item_type)))
    return kind
