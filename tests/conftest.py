"""Suite-wide pytest hooks: the header names the Kafka clients the integration tests drive, the
processes the tests start can be interrupted, and misspelt message fields fail."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import signal
import subprocess

# A message built from a dict with a key its schema has in no version fails loudly in tests (in
# production it is logged): moldau/protocol/adapter.py. The servers the tests start get it too.
os.environ["MOLDAU_STRICT_FIELDS"] = "1"

# Tests stop CLI processes with SIGINT, as Ctrl-C would. A suite started in the background by a
# non-interactive shell inherits SIGINT ignored, and an ignored signal stays ignored across
# fork and exec, so every CLI it started would ignore the SIGINT too and never stop. A handled
# signal goes back to its default in the exec'd child: handle it here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _tool_version(command: list[str]) -> str:
    if shutil.which(command[0]) is None:
        return "not installed"
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error})"
    lines = (result.stdout or result.stderr).strip().splitlines()
    versions = [line for line in lines if "version" in line.lower()] or lines
    return versions[0].strip() if versions else "unknown"


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def pytest_report_header() -> list[str]:
    python_clients = ", ".join(
        f"{name} {_package_version(name)}"
        for name in ("confluent-kafka", "kafka-python", "aiokafka")
    )
    return [
        f"kafka clients: {python_clients}",
        f"kcat: {_tool_version(['kcat', '-V'])}; node: {_tool_version(['node', '--version'])}",
    ]
