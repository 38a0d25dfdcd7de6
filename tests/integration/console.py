"""Helpers for the web console's tests: a `moldau console` process, a plain HTTP client that
keeps the console's CSRF token, and headless Chromium (Debian's, driven by Playwright).

A test that starts a console stops it by its PID (SIGTERM, then it must exit 0). Screenshots go
to `tests/artifacts/console/` (ignored by git), where CI leaves them for a person to look at.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import require_tool

READY_LINE = re.compile(r"Moldau console: (?P<url>http://\S+/)")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
CHROMIUM_ARGUMENTS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]


class ConsoleProcess:
    """One `python -m moldau console` child; `url` once it printed its ready line."""

    def __init__(
        self, bootstrap: str, arguments: Sequence[str] = (), program: Sequence[str] = ()
    ) -> None:
        """`program`: the command that runs `moldau` (an installed console script), instead of
        this interpreter's `-m moldau`."""
        command = [*(program or [sys.executable, "-m", "moldau"]), "console", "-b", bootstrap]
        command += ["--listen", "127.0.0.1:0", "--refresh", "0.5", *arguments]
        environment = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("MOLDAU_") and not (program and k in ("PYTHONPATH", "VIRTUAL_ENV"))
        }
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S):
            self.stop(check=False)
            pytest.fail(f"moldau console printed no ready line; output:\n{self.output()}")

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            self.lines.append(line)
            match = READY_LINE.search(line)
            if match and not self._ready.is_set():
                self.url = match["url"]
                self._ready.set()

    def output(self) -> str:
        return "".join(self.lines) or "(no output)"

    def stop(self, *, check: bool = True) -> None:
        """SIGTERM by PID; it must exit 0 in STOP_TIMEOUT_S (killed otherwise)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"moldau console ignored SIGTERM; output:\n{self.output()}")
        self._reader.join(5)
        if check:
            assert code == 0, f"moldau console exited {code}; output:\n{self.output()}"
        assert "Traceback" not in self.output(), self.output()


@contextmanager
def running_console(
    bootstrap: str, arguments: Sequence[str] = (), program: Sequence[str] = ()
) -> Iterator[ConsoleProcess]:
    console = ConsoleProcess(bootstrap, arguments, program)
    try:
        yield console
    finally:
        console.stop()


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    text: str
    headers: Mapping[str, str]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


class ConsoleHttp:
    """GETs and form POSTs as the console's own pages send them (its Origin, its CSRF token)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._opener = urllib.request.build_opener(_NoRedirects)
        self.token = ""

    def get(self, path: str) -> Answer:
        answer = self._send(urllib.request.Request(self.url + path))
        found = re.search(r'<meta name="csrf-token" content="([^"]+)"', answer.text)
        if found:
            self.token = found[1]
        return answer

    def post(self, path: str, fields: Mapping[str, str]) -> Answer:
        if not self.token:
            self.get("/")
        body = urllib.parse.urlencode({"csrf_token": self.token, **fields}).encode()
        request = urllib.request.Request(
            self.url + path,
            data=body,
            headers={
                "Origin": self.url,
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        return self._send(request)

    def _send(self, request: urllib.request.Request) -> Answer:
        try:
            with self._opener.open(request, timeout=30) as response:
                return Answer(response.status, response.read().decode(), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.read().decode(), dict(error.headers))


def chromium_path() -> str:
    """Debian's Chromium (scripts/setup.sh installs it): skipped without it, failed in CI."""
    return require_tool("chromium", "Debian package chromium")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_until(condition: Any, what: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")
