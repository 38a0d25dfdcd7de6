#!/usr/bin/env bash
# The long chaos campaign, whose figures RELIABILITY.md records (the CI subset is
# tests/chaos/test_chaos.py::test_no_acknowledged_record_is_lost_or_duplicated).
#
#   scripts/chaos.sh [RUNS_PER_SCENARIO] [SCENARIOS]      defaults: 20, every scenario
#
# SCENARIOS is a comma-separated list of tests/chaos/runner.py's SCENARIOS (kill-leader,
# kill-follower, kill-controller, kill-controller-and-broker, kill-all, pause-leader,
# pause-follower, mixed, kill-leader-acks1, and the network partitions partition-leader,
# partition-controller, one-way, bridge, slow-link, which need root and iproute2: each node runs in a
# network namespace of its own, removed after the run; the disk faults torn-tail, disk-full
# (root: a tmpfs per node) and disk-eio; the wall-clock jumps clock-jump, clock-jump-all, which
# need a C compiler (scripts/setup.sh); and the operations under load rolling-restart,
# delete-topic, reassign, voters, tests/chaos/operations.py). Seeds run from MOLDAU_CHAOS_SEED
# (1) upwards, so `MOLDAU_CHAOS_SEED=17 scripts/chaos.sh 1 pause-leader` replays one run;
# MOLDAU_CHAOS_STEPS=N gives every run N faults instead of its scenario's few (more faults for
# one cluster's start). One 3-node cluster at a time, at nice 10. Each run is bounded: a few
# faults, about 150 records a second, a minute or two. Everything goes to
# chaos-artifacts/campaign-<time>/ (or $MOLDAU_CHAOS_OUT): runs.jsonl (one line a run), and for
# each failing run its history, node logs and data and violation.txt (the seed, the fault
# schedule, the records involved). Prints the table for RELIABILITY.md. Exits non-zero if any
# run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-20}
SCENARIOS=${2:-}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${MOLDAU_CHAOS_OUT:-chaos-artifacts/campaign-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

echo "chaos: commit $(git rev-parse --short HEAD), $RUNS runs of ${SCENARIOS:-every scenario}" \
    "from seed ${MOLDAU_CHAOS_SEED:-1}, into $OUT"
started=$(date +%s)
MOLDAU_CHAOS_RUNS=$RUNS MOLDAU_CHAOS_SCENARIO=$SCENARIOS MOLDAU_CHAOS_OUT=$OUT \
    nice -n 10 "$PYTHON" -m pytest -q -p no:cacheprovider \
    tests/chaos/test_chaos.py::test_campaign >"$OUT/pytest.log" 2>&1
status=$?
echo "chaos: done in $(($(date +%s) - started)) s (pytest exit $status)"
if [ -f "$OUT/runs.jsonl" ]; then
    "$PYTHON" -m tests.chaos.summary "$OUT/runs.jsonl"
fi
if [ "$status" -ne 0 ]; then
    echo "chaos: FAILED (see $OUT/pytest.log and the violation.txt of each failing run)" >&2
    grep -h "^chaos run INVALID" "$OUT"/*/violation.txt 2>/dev/null >&2
    exit 1
fi
echo "chaos: every run valid"
