"""Spark's built-in Kafka connector (`format("kafka")`), as the tests, `bench/spark.py` and the
example pipeline run it against Moldau.

`scripts/setup.sh` resolves it from Maven Central (`tests/java/spark-kafka/pom.xml`: the
connector built for the PySpark that pyproject.toml's test extra pins, with the Kafka Java client
it was built with) into `tests/java/spark-kafka/lib/`. A SparkSession loads those jars through
`spark.jars`, which counts only when the session's JVM starts.
"""

from __future__ import annotations

import re
from pathlib import Path

LIB_DIR = Path(__file__).resolve().parent / "java" / "spark-kafka" / "lib"
_CONNECTOR_JAR = re.compile(r"spark-sql-kafka-0-10_2\.13-(?P<version>.+)\.jar")


def connector_jars() -> list[Path]:
    return sorted(LIB_DIR.glob("*.jar"))


def unavailable() -> str | None:
    """Why `format("kafka")` cannot run in this environment's PySpark, or None when it can."""
    import pyspark

    versions = [
        found["version"]
        for jar in connector_jars()
        if (found := _CONNECTOR_JAR.fullmatch(jar.name)) is not None
    ]
    if not versions:
        return f"Spark's Kafka connector is not in {LIB_DIR}; run scripts/setup.sh"
    if versions != [pyspark.__version__]:
        return (
            f"Spark's Kafka connector in {LIB_DIR} is {', '.join(versions)} but PySpark is "
            f"{pyspark.__version__}: the connector must be built for the Spark it runs in (the "
            "versions are pinned in pyproject.toml's test extra and "
            "tests/java/spark-kafka/pom.xml); run scripts/setup.sh"
        )
    return None


def spark_jars() -> str | None:
    """The `spark.jars` value that gives a new SparkSession `format("kafka")`, or None when the
    connector is not there for this PySpark (`unavailable()` says why)."""
    if unavailable() is not None:
        return None
    return ",".join(str(jar) for jar in connector_jars())
