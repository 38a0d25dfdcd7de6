"""Avro payloads into one Arrow column, read with the column's reader schema.

Records of every writer schema come out in the reader's shape (Avro's schema resolution: fields
matched by name or alias, defaults for the missing, promotions), or are marked bad with the
reason. A writer schema the reader cannot read by Avro's rules (the registry's own check,
`AvroSchema.read_errors`) makes every record of that id bad at once.

Two ways to read a group of records of one writer schema:

- column-wise (`arrow_avro`): every field of every record read with Arrow compute, then the
  writer's column resolved to the reader's; for schemas of records, primitives, enums, fixed,
  dates, timestamps and unions with null, in groups of COLUMN_WISE_MIN records or more;
- record by record: fastavro reads each payload into a dict with the reader schema (its Cython
  reader, without the logical types that would make Python datetimes: `fastavro_schema`) and
  pyarrow builds the column from the list of dicts in C. Arrays, maps, decimals, small groups,
  and a group the column-wise pass gives up on (bytes that are not UTF-8 in a string).

Both give the same column; `tests/unit/spark/test_arrow_avro.py` holds them to it.
"""

from __future__ import annotations

import io
from typing import Any, Final

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from moldau.registry.avro import AvroSchema
from moldau.registry.schemas import ParsedSchema
from moldau.spark.arrow_avro import ColumnWiseDecoding, readable, resolvable, resolve
from moldau.spark.avro_types import (
    UnsupportedSchema,
    arrow_type,
    avro_type,
    fastavro_schema,
    spark_type,
)
from moldau.spark.decoded import Decoded, describe
from moldau.spark.framing import Payloads

__all__ = ["COLUMN_WISE_MIN", "AvroColumnDecoder"]

# Below this many records a group costs the column-wise pass more than fastavro's call per
# record: measured on an eight-field record, ~1.8 ms of Arrow calls per group whatever its size
# against ~4.5 µs per record (bench/spark_registry.py's schema; BENCHMARKS.md).
COLUMN_WISE_MIN: Final = 400


class AvroColumnDecoder:
    """One column's reader schema, and what it takes to read each writer schema's records."""

    def __init__(
        self,
        reader: ParsedSchema,
        *,
        description: str,
        column_wise_min: int | None = COLUMN_WISE_MIN,
    ) -> None:
        """`column_wise_min`: the smallest group read column-wise (None: none is)."""
        if not isinstance(reader, AvroSchema):
            raise ValueError(f"{description} is a {reader.schema_type} schema, not Avro")
        self.reader = reader
        self.description = description
        self.column_wise_min = column_wise_min
        self.tree = avro_type(reader.parsed, reader.named)
        self.spark_type = spark_type(self.tree)
        self.arrow_type = arrow_type(self.tree)
        self._fastavro_reader = _fastavro_parsed(reader)
        self._writers: dict[int, _WriterSchema] = {}

    def decode(
        self, writer_id: int, writer: ParsedSchema, payloads: Payloads, data: bytes
    ) -> Decoded:
        """The records of `payloads`, all written with schema `writer_id`; `data` is the bytes
        of the payloads' buffer."""
        known = self._writers.get(writer_id)
        if known is None:
            known = self._writers[writer_id] = self._writer(writer_id, writer)
        if known.refusal:
            return Decoded.all_bad(self.arrow_type, len(payloads), known.refusal)
        smallest = self.column_wise_min
        if known.column_wise is not None and smallest is not None and len(payloads) >= smallest:
            found = known.column_wise.decode(payloads)
            if found is not None:
                values, bad = found
                if known.resolve_from is not None:
                    values = resolve(values, known.resolve_from, self.tree)
                if bad is None:
                    return Decoded(values)
                first = pc.index(bad, True).as_py()
                [payload] = payloads.take(pa.array([first])).as_bytes(data)
                reason = _read(known, payload)[1] or "its fields do not fill the payload"
                return Decoded(values, bad, f"not Avro of schema id {writer_id}: {reason}")
        return self._record_by_record(writer_id, known, payloads, data)

    def _record_by_record(
        self, writer_id: int, known: _WriterSchema, payloads: Payloads, data: bytes
    ) -> Decoded:
        rows: list[Any] = []
        bad: list[bool] = []
        reason = ""
        for payload in payloads.as_bytes(data):
            row, error = _read(known, payload)
            if error:
                reason = reason or f"not Avro of schema id {writer_id}: {error}"
            rows.append(row)
            bad.append(bool(error))
        return Decoded.from_rows(rows, bad, reason, self.arrow_type)

    def _writer(self, writer_id: int, writer: ParsedSchema) -> _WriterSchema:
        if not isinstance(writer, AvroSchema):
            return _WriterSchema(
                refusal=f"schema id {writer_id} is a {writer.schema_type} schema, not Avro"
            )
        errors = self.reader.read_errors(writer)
        if errors:
            return _WriterSchema(
                refusal=f"records of schema id {writer_id} cannot be read with "
                f"{self.description}: {'; '.join(errors)}"
            )
        same = writer.canonical() == self.reader.canonical()
        known = _WriterSchema(
            fastavro=self._fastavro_reader if same else _fastavro_parsed(writer),
            fastavro_reader=None if same else self._fastavro_reader,
        )
        try:
            tree = self.tree if same else avro_type(writer.parsed, writer.named)
        except UnsupportedSchema:
            return known  # (a union of several types: fastavro reads it, with the reader's)
        if readable(tree) and (same or resolvable(tree, self.tree)):
            known.column_wise = ColumnWiseDecoding(tree)
            known.resolve_from = None if same else tree
        return known


class _WriterSchema:
    """How to read one writer schema's records (or why they cannot be read)."""

    __slots__ = ("column_wise", "fastavro", "fastavro_reader", "refusal", "resolve_from")

    def __init__(
        self, *, fastavro: Any = None, fastavro_reader: Any = None, refusal: str = ""
    ) -> None:
        self.fastavro = fastavro
        self.fastavro_reader = fastavro_reader
        self.refusal = refusal
        self.column_wise: ColumnWiseDecoding | None = None
        self.resolve_from: Any = None  # the writer's tree, when it is not the reader's


def _read(known: _WriterSchema, payload: bytes) -> tuple[Any, str]:
    """One payload as fastavro reads it with the reader schema, or why it cannot be read."""
    stream = io.BytesIO(payload)
    try:
        row = fastavro.schemaless_reader(stream, known.fastavro, known.fastavro_reader)
    except Exception as error:  # fastavro's errors have no common base
        return None, describe(error)
    if stream.tell() != len(payload):
        return None, f"{len(payload) - stream.tell()} bytes after the record"
    return row, ""


def _fastavro_parsed(schema: AvroSchema) -> Any:
    named = {name: fastavro_schema(value) for name, value in schema.named.items()}
    return fastavro.parse_schema(fastavro_schema(schema.parsed), named_schemas=named)
