"""The row schema of Spark's Kafka source and the Arrow record batches that carry it.

`source_schema(include_headers)` is the Spark `StructType`; `records_to_arrow` turns decoded
records of one partition into one `pyarrow.RecordBatch` column by column, with the exact Arrow
types Spark expects for that schema (timestamps in microseconds, UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from moldau.client import Message

__all__ = ["HEADERS_TYPE", "arrow_schema", "records_to_arrow", "source_schema"]

HEADERS_TYPE: Final = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_ARROW_HEADERS: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BASE_FIELDS: Final = [
    ("key", BinaryType(), pa.binary()),
    ("value", BinaryType(), pa.binary()),
    ("topic", StringType(), pa.string()),
    ("partition", IntegerType(), pa.int32()),
    ("offset", LongType(), pa.int64()),
    ("timestamp", TimestampType(), pa.timestamp("us", tz="UTC")),
    ("timestampType", IntegerType(), pa.int32()),
]


def source_schema(include_headers: bool = False) -> StructType:
    fields = [StructField(name, spark_type) for name, spark_type, _ in _BASE_FIELDS]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    fields = [pa.field(name, arrow_type) for name, _, arrow_type in _BASE_FIELDS]
    if include_headers:
        fields.append(pa.field("headers", _ARROW_HEADERS))
    return pa.schema(fields)


def records_to_arrow(
    messages: Sequence[Message], *, include_headers: bool = False
) -> pa.RecordBatch:
    """One record batch holding `messages` (all from one topic-partition)."""
    count = len(messages)
    topic = messages[0].topic() if messages else ""
    partition = messages[0].partition() if messages else 0
    timestamps = pa.array([m.timestamp()[1] * 1000 for m in messages], type=pa.int64())
    columns = [
        pa.array([m.key() for m in messages], type=pa.binary()),
        pa.array([m.value() for m in messages], type=pa.binary()),
        pa.array([topic] * count, type=pa.string()),
        pa.array([partition] * count, type=pa.int32()),
        pa.array([m.offset() for m in messages], type=pa.int64()),
        timestamps.cast(pa.timestamp("us", tz="UTC")),
        # Spark's timestampType: 0 CreateTime, 1 LogAppendTime (the client counts from 1).
        pa.array([m.timestamp()[0] - 1 for m in messages], type=pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in m.headers()] for m in messages],
                type=_ARROW_HEADERS,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
