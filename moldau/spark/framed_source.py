"""The source's `key`/`value` columns decoded from the schema registry's wire format.

On the driver, `reader_schemas` picks each decoded column's reader schema (`<column>.subject`
at `<column>.schema.version`, the latest by default) and its Spark type; `decoded_schema` is the
source's row schema with those types in place of `binary`, and with `_corrupt_key` /
`_corrupt_value` (binary) under `mode=PERMISSIVE`.

In a task, `FramedDecoder.decode(batch)` turns each Arrow batch the partition reader yields into
one with typed columns: the headers of all rows are read column-wise (`framing`), rows are
grouped by schema id, each group is decoded by the column's decoder (Avro or JSON Schema) and
the groups are put back in row order with one `take`. A null key or value stays null. A row
that cannot be decoded (no magic byte, an id the registry does not know, a payload that is not
what its schema says, a writer schema the reader schema cannot read) fails the task with the
row's topic, partition and offset (FAILFAST, the default), or is null with its bytes in the
`_corrupt_<column>` column (PERMISSIVE).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, DataType, StructField, StructType

from moldau.registry.schemas import ParsedSchema
from moldau.spark.arrow_varints import row_numbers
from moldau.spark.avro_decoding import AvroColumnDecoder
from moldau.spark.avro_types import spark_arrow_type
from moldau.spark.decoded import Decoded
from moldau.spark.framing import Frames, Payloads, read_frames
from moldau.spark.json_decoding import JsonColumnDecoder
from moldau.spark.registry_lookup import SchemaLookup, UnknownSchema
from moldau.spark.registry_options import FramedColumn, RecordFormat, RegistryOptions

__all__ = [
    "CorruptRecord",
    "FramedDecoder",
    "ReaderSchema",
    "corrupt_column",
    "decoded_schema",
    "reader_schemas",
]

log = logging.getLogger(__name__)

_INT64: Final = pa.int64()


class CorruptRecord(ValueError):
    """A record that cannot be decoded, under `mode=FAILFAST`."""


class ColumnDecoder(Protocol):
    spark_type: DataType
    arrow_type: pa.DataType

    def decode(
        self, writer_id: int, writer: ParsedSchema, payloads: Payloads, data: bytes
    ) -> Decoded: ...


class Lookup(Protocol):
    def parsed(self, schema_id: int) -> ParsedSchema:
        """The schema of an id (UnknownSchema: the registry does not know it)."""
        ...


@dataclass(frozen=True, slots=True)
class ReaderSchema:
    """A decoded column's reader schema, decided on the driver (picklable)."""

    column: FramedColumn
    schema_id: int
    version: int
    spark_type: DataType

    @property
    def description(self) -> str:
        return f"version {self.version} of subject {self.column.subject!r} (id {self.schema_id})"


def corrupt_column(column: str) -> str:
    return f"_corrupt_{column}"


def column_decoder(
    column: FramedColumn, reader: ParsedSchema, *, description: str
) -> ColumnDecoder:
    if column.format is RecordFormat.AVRO:
        return AvroColumnDecoder(reader, description=description)
    return JsonColumnDecoder(reader, description=description)


def reader_schemas(options: RegistryOptions) -> tuple[ReaderSchema, ...]:
    """Each decoded column's reader schema and Spark type, from the registry (driver)."""
    lookup = SchemaLookup(options.connection)
    readers = []
    for column in options.columns:
        found = lookup.version(column.subject, column.version)
        description = f"version {found.version} of subject {column.subject!r}"
        try:
            parsed = lookup.parsed(found.schema.schema_id)
            decoder = column_decoder(column, parsed, description=description)
        except (UnknownSchema, ValueError) as error:
            raise ValueError(
                f"option '{column.column}.format' is {column.format}: {description} cannot be a "
                f"Spark column: {error}"
            ) from None
        readers.append(
            ReaderSchema(column, found.schema.schema_id, found.version, decoder.spark_type)
        )
    return tuple(readers)


def decoded_schema(
    base: StructType, readers: Sequence[ReaderSchema], *, permissive: bool
) -> StructType:
    types = {reader.column.column: reader.spark_type for reader in readers}
    fields = [StructField(f.name, types.get(f.name, f.dataType), True) for f in base.fields]
    if permissive:
        fields += [StructField(corrupt_column(r.column.column), BinaryType()) for r in readers]
    return StructType(fields)


class FramedDecoder:
    """Decodes the framed columns of one task's batches (a lookup per task: each schema id is
    asked for once)."""

    def __init__(
        self,
        options: RegistryOptions,
        readers: Sequence[ReaderSchema],
        *,
        lookup: Lookup | None = None,
    ) -> None:
        self.permissive = options.permissive
        self.lookup = lookup or SchemaLookup(options.connection)
        self.columns: list[tuple[ReaderSchema, ColumnDecoder, pa.DataType]] = []
        for reader in readers:
            parsed = self.lookup.parsed(reader.schema_id)
            decoder = column_decoder(reader.column, parsed, description=reader.description)
            if decoder.spark_type != reader.spark_type:
                raise RuntimeError(
                    f"{reader.description} changed after the query was planned: plan it again"
                )
            self.columns.append((reader, decoder, spark_arrow_type(reader.spark_type)))
        self._warned = False

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = list(batch.schema.names)
        arrays = list(batch.columns)
        fields = list(batch.schema)
        corrupt: list[tuple[str, pa.Array]] = []
        for reader, decoder, target in self.columns:
            index = names.index(reader.column.column)
            decoded = self._decode_column(reader, decoder, arrays[index], batch)
            values = decoded.values
            arrays[index] = values if values.type == target else values.cast(target)
            fields[index] = pa.field(reader.column.column, target)
            if self.permissive:
                name = corrupt_column(reader.column.column)
                corrupt.append((name, _corrupt_bytes(batch.column(index), decoded.bad)))
        for name, array in corrupt:
            arrays.append(array)
            fields.append(pa.field(name, pa.binary()))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _decode_column(
        self,
        reader: ReaderSchema,
        decoder: ColumnDecoder,
        column: pa.Array,
        batch: pa.RecordBatch,
    ) -> Decoded:
        frames = read_frames(column)
        schema_ids = pc.unique(frames.schema_ids.filter(frames.framed)).to_pylist()
        if len(schema_ids) == 1 and pc.all(frames.framed).as_py():  # the common case
            decoded = self._decode_group(decoder, schema_ids[0], frames, None)
            return self._checked(reader, decoded, batch)
        parts: list[tuple[pa.Array, Decoded]] = []  # (rows, their values)
        if pc.any(frames.unframed).as_py():
            rows = pc.indices_nonzero(frames.unframed)
            reason = "not in the schema registry's wire format (no magic byte 0 and schema id)"
            parts.append((rows, Decoded.all_bad(decoder.arrow_type, len(rows), reason)))
        for schema_id in schema_ids:
            matches = pc.equal(frames.schema_ids, pa.scalar(schema_id, _INT64))
            rows = pc.indices_nonzero(pc.fill_null(matches, False))
            parts.append((rows, self._decode_group(decoder, schema_id, frames, rows)))
        return self._checked(reader, _in_row_order(parts, len(column), decoder.arrow_type), batch)

    def _decode_group(
        self, decoder: ColumnDecoder, schema_id: int, frames: Frames, rows: pa.Array | None
    ) -> Decoded:
        payloads = frames.payloads if rows is None else frames.payloads.take(rows)
        try:
            writer = self.lookup.parsed(schema_id)
        except UnknownSchema as error:
            return Decoded.all_bad(decoder.arrow_type, len(payloads), str(error))
        return decoder.decode(schema_id, writer, payloads, frames.data_bytes)

    def _checked(self, reader: ReaderSchema, decoded: Decoded, batch: pa.RecordBatch) -> Decoded:
        """`decoded`, unless a row is bad and the mode is FAILFAST."""
        if decoded.bad is None:
            return decoded
        first = pc.index(decoded.bad, True).as_py()
        if first < 0:
            return Decoded(decoded.values)
        where = (
            f"{batch.column('topic')[first]}-{batch.column('partition')[first]} "
            f"offset {batch.column('offset')[first]}"
        )
        message = f"the {reader.column.column} of {where}: {decoded.reason}"
        if not self.permissive:
            raise CorruptRecord(
                f"{message}. Set the option mode=PERMISSIVE to read such records as null "
                f"with their bytes in column {corrupt_column(reader.column.column)}."
            )
        if not self._warned:
            self._warned = True
            log.warning("%s (mode=PERMISSIVE: null, bytes in %s; further ones not logged)",
                        message, corrupt_column(reader.column.column))  # fmt: skip
        return decoded


def _in_row_order(parts: list[tuple[pa.Array, Decoded]], count: int, kind: pa.DataType) -> Decoded:
    """The groups' values put back in the rows' order (one `take`); rows in no group (null
    keys or values) are null."""
    if not parts:
        return Decoded(pa.nulls(count, kind))
    rows = pa.concat_arrays([group_rows.cast(_INT64) for group_rows, _decoded in parts])
    values = pa.concat_arrays([decoded.values for _rows, decoded in parts])
    bad = pa.concat_arrays(
        [
            decoded.bad if decoded.bad is not None else pa.repeat(pa.scalar(False), len(group))
            for group, decoded in parts
        ]
    )
    reason = _first_reason(parts)
    # place[row] = where the row's value is in `values` (null: nowhere)
    order = pc.sort_indices(rows).cast(_INT64)
    if len(rows) == count:
        place = order
    else:
        listed = pc.is_in(row_numbers(count), value_set=rows)
        place = pc.replace_with_mask(pa.nulls(count, _INT64), listed, order)
    return Decoded(
        pc.take(values, place),
        pc.fill_null(pc.take(bad, place), False) if reason else None,
        reason,
    )


def _first_reason(parts: list[tuple[pa.Array, Decoded]]) -> str:
    """The reason of the group holding the first bad row (FAILFAST names that row)."""
    first_bad: list[tuple[int, str]] = []
    for rows, decoded in parts:
        if decoded.bad is not None:
            row = pc.min(rows.filter(decoded.bad)).as_py()
            if row is not None:
                first_bad.append((row, decoded.reason))
    return min(first_bad)[1] if first_bad else ""


def _corrupt_bytes(column: pa.Array, bad: pa.BooleanArray | None) -> pa.Array:
    if bad is None:
        return pa.nulls(len(column), pa.binary())
    return pc.if_else(bad, column, pa.scalar(None, pa.binary()))
