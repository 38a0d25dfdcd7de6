"""The sink's Avro encoding of a column (`encode_column`): framed with the registered id, read
back by fastavro and by the source's decoder as the same values; nulls stay null."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from moldau.spark.avro_types import avro_schema_of, spark_arrow_type
from moldau.spark.framed_sink import WriterSchema, encode_column
from moldau.spark.framed_source import FramedDecoder, ReaderSchema
from moldau.spark.framing import frame_header
from moldau.spark.registry_options import (
    FramedColumn,
    RecordFormat,
    RegistryConnection,
    RegistryOptions,
)

from .registry_records import FakeLookup, avro, source_batch

ORDER = StructType(
    [
        StructField("id", LongType()),
        StructField("customer", StringType()),
        StructField("amount", DoubleType()),
        StructField("placed", TimestampType()),
        StructField("day", DateType()),
        StructField("price", DecimalType(10, 2)),
        StructField("tags", ArrayType(StringType())),
        StructField("attributes", MapType(StringType(), LongType())),
        StructField("address", StructType([StructField("city", StringType())])),
    ]
)
COLUMN = FramedColumn(column="value", format=RecordFormat.AVRO, subject="orders-value")


def rows() -> list[dict[str, object] | None]:
    return [
        {
            "id": n,
            "customer": f"c{n}",
            "amount": n / 4,
            "placed": datetime(2026, 1, 2, 3, 4, 5, n, tzinfo=UTC),
            "day": date(2026, 1, 1 + n),
            "price": Decimal(f"{n}.25"),
            "tags": ["a"] * n,
            "attributes": {"k": n},
            "address": {"city": "Brno"} if n % 2 else None,
        }
        if n != 2
        else None
        for n in range(5)
    ]


def test_a_struct_column_is_written_as_framed_avro_of_the_derived_schema() -> None:
    document = avro_schema_of(ORDER, name="Order", namespace="shop")
    writer = WriterSchema(COLUMN, 42, json.dumps(document))
    column = pa.array(rows(), type=spark_arrow_type(ORDER))
    encoded = encode_column(column, writer)
    assert encoded.is_null().to_pylist() == [False, False, True, False, False]
    parsed = fastavro.parse_schema(document)
    for value, row in zip(encoded.to_pylist(), rows(), strict=True):
        if row is None:
            assert value is None
            continue
        assert value[:5] == frame_header(42)
        assert fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None) == row

    # and the source's decoder reads what the sink wrote as the same column
    options = RegistryOptions(
        connection=RegistryConnection(url="http://127.0.0.1:1"), columns=(COLUMN,)
    )
    reader = ReaderSchema(COLUMN, 42, 1, ORDER)
    decoder = FramedDecoder(options, [reader], lookup=FakeLookup({42: avro(document)}))
    decoded = decoder.decode(source_batch(encoded.to_pylist()))
    assert decoded.column("value").to_pylist(maps_as_pydicts="strict") == rows()


def test_a_value_that_does_not_fit_names_its_row() -> None:
    document = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    writer = WriterSchema(COLUMN, 1, json.dumps(document))
    column = pa.array([{"id": 1}, {"id": None}], type=pa.struct([("id", pa.int64())]))
    with pytest.raises(ValueError, match="row 1 of column value does not fit"):
        encode_column(column, writer)
