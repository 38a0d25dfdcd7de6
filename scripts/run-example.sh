#!/usr/bin/env bash
# The main job, for now: start a single-node Moldau on a temporary directory and an ephemeral
# port, send a few records with confluent-kafka, read them back, print them and stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/example_roundtrip.py "$@"
