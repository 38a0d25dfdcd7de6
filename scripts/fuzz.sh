#!/usr/bin/env bash
# The long fuzzing campaign, whose figures FUZZING.md records (the CI subset is tests/fuzz).
#
#   scripts/fuzz.sh [NETWORK_FRAMES] [SECONDS_PER_ATHERIS_TARGET] [QUORUM_MESSAGES]
#                                                         defaults: 1000000 600 60000
#
# 1. The network fuzzer sends NETWORK_FRAMES frames to a real `moldau server` it starts
#    (tests/fuzz/network.py: its checks, and what it saves on a failure).
# 2. Each atheris target (frames, records, handlers) runs SECONDS_PER_ATHERIS_TARGET seconds
#    from the committed seeds (tests/fuzz/run.py).
# 3. The quorum fuzzer sends QUORUM_MESSAGES hostile Raft RPCs to the controller listeners of
#    a cluster of three nodes it starts (tests/fuzz/quorum.py).
# Everything goes to fuzz-artifacts/campaign-<time>/ (or $FUZZ_OUT): network.json, the
# libFuzzer logs, the corpora grown, any crash. Runs at nice 10: the machine stays usable.
# Exits non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."

FRAMES=${1:-1000000}
SECONDS_EACH=${2:-600}
QUORUM_MESSAGES=${3:-60000}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${FUZZ_OUT:-fuzz-artifacts/campaign-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

echo "fuzz: commit $(git rev-parse --short HEAD), $FRAMES network frames, ${SECONDS_EACH}s per target, into $OUT"
failed=()

started=$(date +%s)
nice -n 10 "$PYTHON" -m tests.fuzz.network --frames "$FRAMES" --seed 1 --artifacts "$OUT" --json \
    >"$OUT/network.json" || failed+=(network)
echo "fuzz: network done in $(($(date +%s) - started)) s: $(cat "$OUT/network.json")"

declare -A seeds=([frames]=requests [records]=records [handlers]=handlers)
for target in frames records handlers; do
    mkdir -p "$OUT/corpus-$target"
    nice -n 10 "$PYTHON" -m tests.fuzz.run "$target" -max_total_time="$SECONDS_EACH" -seed=1 \
        -rss_limit_mb=1536 -timeout=30 -print_final_stats=1 -artifact_prefix="$OUT/" \
        "$OUT/corpus-$target" "tests/fuzz/corpus/${seeds[$target]}" >"$OUT/atheris-$target.log" 2>&1 \
        || failed+=("$target")
    echo "fuzz: $target: $(grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$OUT/atheris-$target.log" | tr '\n' ' ')"
done

started=$(date +%s)
nice -n 10 "$PYTHON" -m tests.fuzz.quorum --messages "$QUORUM_MESSAGES" --seed 1 --json \
    --artifacts "$OUT/quorum" >"$OUT/quorum.json" || failed+=(quorum)
echo "fuzz: quorum done in $(($(date +%s) - started)) s: $(cat "$OUT/quorum.json")"

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (see $OUT)" >&2
    exit 1
fi
echo "fuzz: no failure"
