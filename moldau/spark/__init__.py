"""PySpark data source and sink for Moldau: `format("moldau")`, batch and Structured Streaming.

Options, offsets JSON and row schema are those of Spark's built-in Kafka source and sink; see
README.md. `register(spark)` adds the format to a session (PySpark 4.2 or newer).
"""

from moldau.spark.data_source import MoldauDataSource, register

__all__ = ["MoldauDataSource", "register"]
