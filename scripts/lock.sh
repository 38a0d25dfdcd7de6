#!/usr/bin/env bash
# Refresh requirements.lock: the exact version and hashes of every package that
# moldau[test,spark] needs, resolved by uv (pinned in the test extra) from the open ranges in
# pyproject.toml, for the machines the README names (Linux on x86-64, Python 3.11; a release
# with no wheel for them, and no source, is passed over). scripts/setup.sh
# installs from it, so every developer and CI test against the same packages; run this after
# changing a dependency in pyproject.toml, or to take newer releases, and commit both files.
#   scripts/lock.sh            rewrite requirements.lock
#   scripts/lock.sh --check    exit 1 if pyproject.toml's dependencies changed since the lock
#                              was written (scripts/setup.sh runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements.lock

python=.venv/bin/python
[ -x "$python" ] || python=python3

# The dependencies as pyproject.toml declares them; the lock records their digest.
digest=$("$python" - <<'PY'
import hashlib, json, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
declared = [project["requires-python"], project["dependencies"], project["optional-dependencies"]]
print(hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest())
PY
)
marker="# pyproject.toml dependencies sha256: $digest"

if [ "${1:-}" = "--check" ]; then
    if ! grep -qxF "$marker" "$LOCK" 2>/dev/null; then
        echo "lock: pyproject.toml's dependencies changed since $LOCK was written: run scripts/lock.sh" >&2
        exit 1
    fi
    exit 0
fi

if [ ! -x .venv/bin/python ]; then
    echo "lock: no .venv: run scripts/setup.sh first" >&2
    exit 1
fi
uv_pin=$(.venv/bin/python -c 'import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
print(next(d for d in extra if d.startswith("uv==")))')
if [ "$(.venv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" != "${uv_pin#uv==}" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "$uv_pin"
fi
resolved=$(mktemp)
trap 'rm -f "$resolved"' EXIT
.venv/bin/uv pip compile pyproject.toml --extra test --extra spark \
    --python-version 3.11 --python-platform x86_64-unknown-linux-gnu --generate-hashes --custom-compile-command scripts/lock.sh \
    --quiet -o "$resolved"
{ echo "$marker"; cat "$resolved"; } >"$LOCK"
echo "lock: wrote $LOCK ($(grep -c '^[a-z]' "$LOCK") packages)"
