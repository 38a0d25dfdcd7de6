#!/usr/bin/env bash
# Run everything CI runs: set-up, lint, format check, strict typing of every package, the
# import-layer contracts, declared dependencies and the whole pytest suite. Exits non-zero if any
# step fails; every step runs even after an earlier one failed, so one run shows all problems.
# Extra arguments go to pytest.
#
# The whole run prints its 40 slowest tests, to keep the suite inside its time budget.
#
# --quick (first argument): the same checks, but pytest runs only the fast lane for day-to-day
# work: tests/unit without the tests marked slow, tests/simulation with the first
# QUICK_SIM_SEEDS seeds of each randomised campaign (CI runs 100 to 1,000), and the integration
# smoke tests in QUICK_INTEGRATION. CI (.ci/run) runs everything.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK_SIM_SEEDS=50
QUICK_INTEGRATION=(
    tests/integration/test_kcat.py
    tests/integration/test_confluent_kafka.py
)
quick=false
if [ "${1:-}" = "--quick" ]; then
    quick=true
    shift
fi

scripts/setup.sh || { echo "test: set-up failed" >&2; exit 1; }
export PATH="$PWD/.venv/bin:$PATH"

failed=()
step() {
    local name=$1
    shift
    printf '\n== %s: %s\n' "$name" "$*"
    if ! "$@"; then
        failed+=("$name")
    fi
}

step "ruff check" ruff check .
step "ruff format" ruff format --check .

# Strictness comes from [tool.mypy] in pyproject.toml (strict = true); third-party modules are
# read for their types but not reported on.
step "mypy" mypy --follow-imports=silent moldau
step "import contracts" lint-imports
# Every module the installed package imports comes from a dependency pyproject.toml declares
# ([tool.deptry] there); tests/integration/test_fresh_install.py installs the wheel to prove it.
step "declared dependencies" deptry moldau

if [ ${#failed[@]} -gt 0 ]; then
    printf '\ntest: failed before pytest: %s\n' "${failed[*]}"
fi

if $quick; then
    printf '\n== pytest (quick lane)\n'
    MOLDAU_SIM_SEEDS=${MOLDAU_SIM_SEEDS:-$QUICK_SIM_SEEDS} python -m pytest -q -m "not slow" \
        tests/unit tests/simulation "${QUICK_INTEGRATION[@]}" "$@"
else
    printf '\n== pytest\n'
    python -m pytest -q --durations=40 "$@"
fi
pytest_status=$?
if [ "$pytest_status" -eq 5 ]; then
    echo "test: pytest collected no tests" >&2
elif [ "$pytest_status" -ne 0 ]; then
    failed+=("pytest")
fi

if [ ${#failed[@]} -gt 0 ]; then
    exit 1
fi
