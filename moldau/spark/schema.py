"""The row schema of Spark's Kafka source and the Arrow record batches that carry it.

`source_schema(include_headers)` is the Spark `StructType`; `arrow_schema` is its Arrow form, with
the exact Arrow types Spark expects (timestamps in microseconds, UTC), which `arrow_records` fills.
"""

from __future__ import annotations

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

__all__ = ["HEADERS_TYPE", "arrow_schema", "source_schema"]

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
