"""The console's browser files: the vendored libraries are the npm releases recorded in
VENDORED.txt (scripts/vendor-console-assets.sh), and every template and static file is in the
wheel's package data, so `pip install moldau` alone serves the console."""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from pathlib import Path

import moldau.console

PACKAGE = Path(moldau.console.__file__).parent
ROOT = PACKAGE.parents[1]


def test_vendored_files_match_their_recorded_digests() -> None:
    vendor = PACKAGE / "static" / "vendor"
    lines = (vendor / "VENDORED.txt").read_text().splitlines()
    recorded = {name: digest for name, digest, _ in (line.split() for line in lines[1:])}
    present = {path.name for path in vendor.iterdir()} - {"VENDORED.txt"}
    assert set(recorded) == present
    for name, digest in recorded.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name


def test_every_template_and_static_file_is_package_data() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["moldau.console"]
    files = [
        path.relative_to(PACKAGE).as_posix()
        for folder in ("templates", "static")
        for path in (PACKAGE / folder).rglob("*")
        if path.is_file()
    ]
    assert files
    missing = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert missing == []
