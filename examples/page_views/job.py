"""The Structured Streaming job: page views per page per 10-second window.

Reads the events topic with `format("moldau")`, parses the JSON, keeps views, counts them per
page in 10-second event-time windows with a 5-second watermark, and on each micro-batch writes
the updated counts as JSON records to the results topic (with `format("moldau")`) and as rows to
Parquet. Run it on a Spark cluster unchanged: only the master URL differs. With
`data_format="kafka"` the source and the sink are Spark's own Kafka connector instead, with the
same options (its jars must be on the session's classpath).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

EVENT_SCHEMA = "event_time timestamp, user string, page string, action string"


def page_view_counts(
    spark: SparkSession, bootstrap: str, events_topic: str, data_format: str = "moldau"
) -> DataFrame:
    events = (
        spark.readStream.format(data_format)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", events_topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event"))
        .select("event.*")
    )
    return (
        events.where(F.col("action") == "view")
        .withWatermark("event_time", "5 seconds")
        .groupBy(F.window("event_time", "10 seconds").alias("window"), "page")
        .count()
        .select(
            F.date_format("window.start", "HH:mm:ss").alias("window_start"),
            F.date_format("window.end", "HH:mm:ss").alias("window_end"),
            "page",
            F.col("count").alias("views"),
        )
    )


def start(
    spark: SparkSession,
    *,
    bootstrap: str,
    events_topic: str,
    results_topic: str,
    parquet_dir: str,
    checkpoint_dir: str,
    data_format: str = "moldau",
) -> StreamingQuery:
    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.withColumn("batch_id", F.lit(batch_id))
        batch.write.mode("append").parquet(parquet_dir)
        (
            batch.select(
                F.concat_ws("|", "window_start", "page").alias("key"),
                F.to_json(F.struct("window_start", "window_end", "page", "views")).alias("value"),
            )
            .write.mode("append")
            .format(data_format)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", results_topic)
            .save()
        )

    return (
        page_view_counts(spark, bootstrap, events_topic, data_format)
        .writeStream.outputMode("update")
        .foreachBatch(write_batch)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(processingTime="2 seconds")
        .queryName("page_view_counts")
        .start()
    )
