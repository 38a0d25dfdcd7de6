"""The package as a user installs it: the wheel built from this tree, installed without extras into
a new virtualenv, gives a `moldau` command that starts a server and moves records through it.

A dependency the code imports but `pyproject.toml` does not declare (the test extra brings it into
the development virtualenv) shows up here as a `moldau` that cannot start. pip fetches the
dependencies from its cache or the package index. The development virtualenv itself is the one
requirements.lock pins (scripts/setup.sh installs it; scripts/lock.sh refreshes it).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import ServerFactory
from .console import ConsoleHttp, running_console
from .support import unique_topic

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600


def _run(command: list[str], *, stdin: bytes = b"", cwd: Path) -> bytes:
    completed = subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        timeout=INSTALL_TIMEOUT_S,
        cwd=cwd,
        env=_environment(),
        check=False,
    )
    assert completed.returncode == 0, (
        f"{' '.join(command)} exited {completed.returncode}\n"
        f"stdout: {completed.stdout.decode(errors='replace')[-3000:]}\n"
        f"stderr: {completed.stderr.decode(errors='replace')[-3000:]}"
    )
    return completed.stdout


def _environment() -> dict[str, str]:
    """Nothing of the development virtualenv leaks in: no PYTHONPATH, no MOLDAU_* settings."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MOLDAU_") and key not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    environment["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return environment


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel installed, no extras: its `bin` directory."""
    base = tmp_path_factory.mktemp("fresh-install")
    source = base / "source"  # built from a copy, so the build leaves nothing in the tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "moldau", source / "moldau", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    wheels = base / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(source)],
        cwd=base,
    )
    (wheel,) = wheels.glob("moldau-*.whl")
    environment = base / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(environment)], cwd=base)
    _run([str(environment / "bin" / "python"), "-m", "pip", "install", str(wheel)], cwd=base)
    return environment / "bin"


def test_the_installed_command_prints_its_version(installed: Path, tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    printed = _run([str(installed / "moldau"), "--version"], cwd=tmp_path)
    assert printed.decode().strip() == version


def test_the_installed_package_has_no_extras(installed: Path, tmp_path: Path) -> None:
    probe = "import importlib.util as u; print(u.find_spec('pyspark'), u.find_spec('pytest'))"
    assert _run([str(installed / "python"), "-c", probe], cwd=tmp_path).split() == [b"None"] * 2


def test_the_installed_command_serves_a_round_trip(
    installed: Path, tmp_path: Path, start_server: ServerFactory
) -> None:
    moldau = str(installed / "moldau")
    server = start_server(program=[moldau], environment={"PYTHONPATH": ""}, working_dir=tmp_path)
    b = server.bootstrap_servers
    topic = unique_topic("fresh-install")
    _run([moldau, "topic", "create", topic, "-p", "2", "-b", b], cwd=tmp_path)
    records = b"".join(b"key-%d:value %d\n" % (i, i) for i in range(10))
    _run([moldau, "produce", topic, "-K", ":", "-b", b], stdin=records, cwd=tmp_path)
    consumed = _run([moldau, "consume", topic, "-e", "-f", "%k=%s\\n", "-b", b], cwd=tmp_path)
    assert sorted(consumed.decode().splitlines()) == sorted(f"key-{i}=value {i}" for i in range(10))
    server.stop()


def test_the_installed_console_serves_its_pages_and_browser_files(
    installed: Path, start_server: ServerFactory
) -> None:
    """The templates and the vendored scripts are in the wheel (package data)."""
    server = start_server()
    with running_console(server.bootstrap_servers, program=[str(installed / "moldau")]) as console:
        http = ConsoleHttp(console.url)
        assert "Moldau console" in http.get("/").text
        for path in ("/static/vendor/htmx.min.js", "/static/vendor/uPlot.iife.min.js"):
            assert http.get(path).status == 200, path
    server.stop()


def test_the_lock_matches_pyproject_and_the_test_environment() -> None:
    """requirements.lock was written from pyproject.toml's present dependencies (scripts/lock.sh
    --check), and the environment running the tests has exactly its versions."""
    check = subprocess.run(
        ["scripts/lock.sh", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    locked = dict(
        line.split(" ", 1)[0].split("==")
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if line[:1].isalpha()
    )
    installed = {name: importlib.metadata.version(name) for name in locked}
    assert installed == locked
