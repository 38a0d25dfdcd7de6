"""Running `python -m moldau ...` as a subprocess for the CLI integration tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CLI_TIMEOUT_S = 60


@dataclass(frozen=True, slots=True)
class CliResult:
    code: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def _command(arguments: tuple[str, ...], bootstrap: str | None) -> list[str]:
    command = [sys.executable, "-m", "moldau", *arguments]
    return [*command, "-b", bootstrap] if bootstrap is not None else command


def _environment() -> dict[str, str]:
    """This environment without MOLDAU_* settings, and wide enough for tables not to wrap."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MOLDAU_")}
    environment["COLUMNS"] = "200"
    return environment


def moldau_process(*arguments: str, bootstrap: str | None, **popen: Any) -> subprocess.Popen[bytes]:
    """Start the CLI and leave it running (the caller stops it); `popen` goes to Popen."""
    return subprocess.Popen(_command(arguments, bootstrap), env=_environment(), **popen)


def moldau(
    *arguments: str,
    bootstrap: str | None,
    stdin: bytes = b"",
    expect: int | None = 0,
    timeout: float = CLI_TIMEOUT_S,
) -> CliResult:
    """Run the CLI; with `expect` set, fail unless it exits with that code."""
    completed = subprocess.run(
        _command(arguments, bootstrap),
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=_environment(),
        check=False,
    )
    result = CliResult(
        completed.returncode, completed.stdout, completed.stderr.decode("utf-8", "replace")
    )
    if expect is not None:
        assert result.code == expect, (
            f"moldau {' '.join(arguments)} exited {result.code}, expected {expect}\n"
            f"stdout: {result.stdout[-2000:]!r}\nstderr: {result.stderr[-2000:]}"
        )
    return result


def run_tool(
    command: Sequence[str], *, stdin: bytes = b"", timeout: float = CLI_TIMEOUT_S
) -> bytes:
    completed = subprocess.run(
        list(command), input=stdin, capture_output=True, timeout=timeout, check=False
    )
    assert completed.returncode == 0, (
        f"{' '.join(command)} exited {completed.returncode}\n"
        f"stderr: {completed.stderr.decode(errors='replace')[-2000:]}"
    )
    return completed.stdout
