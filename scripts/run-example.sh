#!/usr/bin/env bash
# The main job: page views per page per 10-second window, end to end. Starts a single-node Moldau
# on a temporary directory (or a local cluster with --nodes N), runs the example Spark Structured
# Streaming pipeline over it (event generator -> format("moldau") source -> windowed counts ->
# format("moldau") sink and Parquet -> a consumer of the results), prints the latest windows and
# a summary, checks the counts and stops everything. Arguments go to
# examples/page_views/pipeline.py (--seconds, --rate, --master, --nodes, and --format kafka for
# Spark's own Kafka connector as the job's source and sink).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if ! command -v java >/dev/null 2>&1; then
    echo "run-example: Java 17 is required by Spark (install openjdk-17-jre-headless)" >&2
    exit 1
fi
exec .venv/bin/python examples/page_views/pipeline.py "$@"
