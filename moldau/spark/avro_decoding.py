"""Avro payloads into one Arrow column, read with the column's reader schema.

Records of every writer schema come out in the reader's shape (Avro's schema resolution: fields
matched by name or alias, defaults for the missing, promotions), or are marked bad with the
reason. A writer schema the reader cannot read by Avro's rules (the registry's own check,
`AvroSchema.read_errors`) makes every record of that id bad at once.

fastavro reads each payload into a dict (its Cython reader, without the logical types that
would make Python datetimes: `fastavro_schema`), and pyarrow builds the column from the list of
dicts in C, so there is no Python code per field.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro

from moldau.registry.avro import AvroSchema
from moldau.registry.schemas import ParsedSchema
from moldau.spark.avro_types import arrow_type, avro_type, fastavro_schema, spark_type
from moldau.spark.decoded import Decoded, describe
from moldau.spark.framing import Payloads

__all__ = ["AvroColumnDecoder"]


class AvroColumnDecoder:
    """One column's reader schema, and what it takes to read each writer schema's records."""

    def __init__(self, reader: ParsedSchema, *, description: str) -> None:
        if not isinstance(reader, AvroSchema):
            raise ValueError(f"{description} is a {reader.schema_type} schema, not Avro")
        self.reader = reader
        self.description = description
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
        rows: list[Any] = []
        bad: list[bool] = []
        reason = ""
        read = fastavro.schemaless_reader
        schema, reader = known.fastavro, known.fastavro_reader
        for payload in payloads.as_bytes(data):
            stream = io.BytesIO(payload)
            try:
                row = read(stream, schema, reader)
                if stream.tell() != len(payload):
                    raise ValueError(f"{len(payload) - stream.tell()} bytes after the record")
                failed = False
            except Exception as error:  # fastavro's errors have no common base
                reason = reason or f"not Avro of schema id {writer_id}: {describe(error)}"
                row, failed = None, True
            rows.append(row)
            bad.append(failed)
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
        return _WriterSchema(
            fastavro=self._fastavro_reader if same else _fastavro_parsed(writer),
            fastavro_reader=None if same else self._fastavro_reader,
        )


class _WriterSchema:
    """How to read one writer schema's records (or why they cannot be read)."""

    __slots__ = ("fastavro", "fastavro_reader", "refusal")

    def __init__(
        self, *, fastavro: Any = None, fastavro_reader: Any = None, refusal: str = ""
    ) -> None:
        self.fastavro = fastavro
        self.fastavro_reader = fastavro_reader
        self.refusal = refusal


def _fastavro_parsed(schema: AvroSchema) -> Any:
    named = {name: fastavro_schema(value) for name, value in schema.named.items()}
    return fastavro.parse_schema(fastavro_schema(schema.parsed), named_schemas=named)
