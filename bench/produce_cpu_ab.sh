#!/bin/bash
# The broker's CPU for 100,000 produce requests of one 100 B record each (confluent-kafka,
# `--profile per-request`), from /proc/PID/stat before and after: a figure that the load of
# other processes on the machine moves far less than throughput does.
#   bench/produce_cpu_ab.sh TREE   (a checkout of Moldau; run it alternately on two trees)
set -u
P=$(cd "$1" && pwd); D=$(mktemp -d /tmp/moldau-cpu-ab-XXXXXX)
OUT=$(mktemp /tmp/moldau-cpu-ab-out-XXXXXX)
PY=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python
# (started from the data directory: `python -m moldau` looks in the current directory before
# PYTHONPATH, so started from a checkout the server would run that checkout, not TREE)
(cd $D && PYTHONPATH=$P exec $PY -m moldau server --override listeners=PLAINTEXT://127.0.0.1:39556 --override log.dirs=$D > /dev/null 2>&1) &
SPID=$!
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/39556) 2>/dev/null && break; sleep 0.2; done
sleep 1
B=$(awk '{print $14+$15}' /proc/$SPID/stat)
cd $P/bench && $PY _producer.py 127.0.0.1:39556 bench --records 100000 --size 100 --acks 1 --profile per-request > $OUT 2>&1
A=$(awk '{print $14+$15}' /proc/$SPID/stat)
kill -TERM $SPID; wait $SPID 2>/dev/null
rm -rf $D
TICKS=$(getconf CLK_TCK)
echo "$(basename "$P") broker CPU $(( (A-B) * 1000000 / TICKS / 100000 )) µs/request" \
     "$(grep -o '"elapsed_s": [0-9.]*' "$OUT")"
rm -f "$OUT"
