"""`MoldauDataSource`: the PySpark data source behind `format("moldau")`.

It validates options on the driver and hands out the batch and stream readers and writers.
`register(spark)` makes the format name available in a session.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from moldau.spark.batch_source import MoldauBatchReader
from moldau.spark.framed_sink import WriterSchema, register_writer_schemas
from moldau.spark.framed_source import ReaderSchema, decoded_schema, reader_schemas
from moldau.spark.options import SinkOptions, SourceOptions, source_registry_options
from moldau.spark.record_writer import check_sink_schema
from moldau.spark.schema import source_schema
from moldau.spark.sink import MoldauBatchWriter, MoldauStreamWriter
from moldau.spark.stream_source import MoldauStreamReader
from moldau.spark.transactional_sink import TransactionalStreamWriter

__all__ = ["MoldauDataSource", "register"]


class MoldauDataSource(DataSource):
    """Options and schema of Spark's Kafka source and sink; see moldau/spark/README.md."""

    @classmethod
    def name(cls) -> str:
        return "moldau"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        registry = source_registry_options(self.options)
        if registry is None:
            return source_schema(include)
        readers = reader_schemas(registry)
        return decoded_schema(source_schema(include), readers, permissive=registry.permissive)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        return MoldauBatchReader(options, _readers(options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = SourceOptions.parse(self.options, streaming=True)
        return MoldauStreamReader(options, _readers(options, schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        return MoldauBatchWriter(options, _writers(options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options, streaming=True)
        writers = _writers(options, schema)
        if options.exactly_once:
            return TransactionalStreamWriter(options, writers)
        return MoldauStreamWriter(options, writers)


def _readers(options: SourceOptions, schema: StructType) -> tuple[ReaderSchema, ...]:
    """The reader schemas of the decoded columns, which must give the columns `schema` has (the
    one `schema()` returned, unless the query gave its own)."""
    if options.registry is None:
        return ()
    readers = reader_schemas(options.registry)
    expected = decoded_schema(
        source_schema(options.include_headers), readers, permissive=options.registry.permissive
    )
    if expected != schema:
        raise ValueError(
            f"the rows decoded with {', '.join(r.description for r in readers)} are "
            f"{expected.simpleString()}, not {schema.simpleString()} (a schema given to the "
            "reader must be the one the registry's schemas make; or a new version was "
            "registered while the query was planned: run it again)"
        )
    return readers


def _writers(options: SinkOptions, schema: StructType) -> tuple[WriterSchema, ...]:
    """The columns' checks, and the schemas of those written in the registry's wire format,
    registered once for the query."""
    registry = options.registry
    encoded = [] if registry is None else [column.column for column in registry.columns]
    check_sink_schema(schema, topic_option=options.topic, encoded=encoded)
    return () if registry is None else register_writer_schemas(registry, schema)


def register(spark: SparkSession | Any) -> None:
    """Make `format("moldau")` available in `spark`."""
    spark.dataSource.register(MoldauDataSource)
