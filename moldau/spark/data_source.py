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
from moldau.spark.options import SinkOptions, SourceOptions
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
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema, topic_option=options.topic)
        return MoldauBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options, streaming=True)
        check_sink_schema(schema, topic_option=options.topic)
        if options.exactly_once:
            return TransactionalStreamWriter(options)
        return MoldauStreamWriter(options)


def register(spark: SparkSession | Any) -> None:
    """Make `format("moldau")` available in `spark`."""
    spark.dataSource.register(MoldauDataSource)
