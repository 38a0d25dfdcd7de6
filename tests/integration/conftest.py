"""Fixtures that run real `moldau server` processes on loopback for the integration tests.

Every server a test starts is stopped by it: SIGTERM, then the process must exit 0 within
STOP_TIMEOUT_S (a server that needs SIGKILL fails the test). Servers write their data under pytest's
temporary directories and listen on ephemeral 127.0.0.1 ports announced by their ready line.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from .kafka_jvm import KAFKA_4_1, KafkaJvm

READY_LINE = re.compile(
    r"Moldau ready: bootstrap\.(?:servers|controllers)=(?P<host>[^\s:]+):(?P<port>\d+)"
)
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
JS_DIR = Path(__file__).parent / "js"


class MoldauServer:
    """One `python -m moldau server` child process; `restart()` keeps its data directory."""

    def __init__(
        self,
        *,
        data_dir: Path,
        log_path: Path,
        overrides: dict[str, str],
        arguments: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
        working_dir: Path | None = None,
        isolated: bool = True,
        open_files_limit: int | None = None,
        namespace: str | None = None,
        program: Sequence[str] | None = None,
    ) -> None:
        """`isolated`: listen on an ephemeral loopback port and keep data in `data_dir` (by
        overrides); without it the server runs on its own defaults or the given arguments.
        `open_files_limit`: the server's RLIMIT_NOFILE (soft and hard). `namespace`: run in
        that network namespace (`ip netns exec` execs the server: `process.pid` is still its
        PID, and it keeps the environment, so PYTHONPATH and this interpreter). `program`: the
        command that runs `moldau` (an installed console script), instead of this interpreter's
        `-m moldau`."""
        self.data_dir = data_dir
        self.log_path = log_path
        self.overrides = dict(overrides)
        self.arguments = list(arguments)
        self.environment = dict(environment or {})
        self.working_dir = working_dir
        self.isolated = isolated
        self.open_files_limit = open_files_limit
        self.namespace = namespace
        self.program = list(program or [sys.executable, "-X", "faulthandler", "-m", "moldau"])
        self.process: subprocess.Popen[bytes] | None = None
        self.host = ""
        self.port = 0
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        # -X faulthandler: SIGABRT makes a hung server print every thread's stack before dying.
        arguments = ["ip", "netns", "exec", self.namespace] if self.namespace else []
        arguments += [*self.program, "server"]
        arguments += self.arguments
        settings = dict(self.overrides)
        if self.isolated:
            settings = {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(self.data_dir),
                # (the registry's default port 8081 and the HTTP endpoints' 9644 are one for
                # the whole machine: off unless a test asks for them)
                "schema.registry.listeners": "",
                "http.listeners": "",
                **settings,
            }
        for key, value in settings.items():
            arguments += ["--override", f"{key}={value}"]
        return arguments

    def start(self) -> MoldauServer:
        self.launch()
        return self.wait_ready()

    def launch(self) -> MoldauServer:
        """Start the process without waiting for its ready line (nodes of one cluster start
        together: none is ready before a quorum of them runs)."""
        assert self.process is None, "server already running"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MOLDAU_")}
        environment["MOLDAU_STRICT_FIELDS"] = os.environ.get("MOLDAU_STRICT_FIELDS", "")
        environment.update(self.environment)
        self._lines = []
        self._ready = threading.Event()
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            cwd=self.working_dir,
            preexec_fn=self._limit_open_files if self.open_files_limit else None,
        )
        self._reader = threading.Thread(target=self._follow_output, daemon=True)
        self._reader.start()
        return self

    def wait_ready(self) -> MoldauServer:
        assert self.process is not None and self._reader is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready.wait(0.05):
            if self.process.poll() is not None:
                self._reader.join(5)
                self.process = None
                pytest.fail(
                    f"moldau server exited with code {self._exit_code_text()} before it was ready; "
                    f"output:\n{self.output_tail()}"
                )
            if time.monotonic() > deadline:
                self._dump_stacks_and_kill()
                pytest.fail(
                    f"moldau server printed no ready line within {START_TIMEOUT_S:.0f}s; "
                    f"output:\n{self.output_tail()}"
                )
        return self

    def _limit_open_files(self) -> None:  # in the child, before exec
        assert self.open_files_limit is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def stop(self, signal_number: int = signal.SIGTERM) -> int:
        """SIGTERM (or the given signal), then require a clean exit (code 0) in STOP_TIMEOUT_S."""
        self.signal_stop(signal_number)
        return self.wait_stopped(signal_number)

    def signal_stop(self, signal_number: int = signal.SIGTERM) -> None:
        """Send the stop signal without waiting (several nodes stopping at once)."""
        process = self.process
        assert process is not None, "server is not running"
        if process.poll() is not None:
            self.process = None
            pytest.fail(
                f"moldau server died during the test (exit code {process.returncode}); "
                f"output:\n{self.output_tail()}"
            )
        process.send_signal(signal_number)

    def wait_stopped(self, signal_number: int = signal.SIGTERM) -> int:
        """After `signal_stop`: require a clean exit (code 0) within STOP_TIMEOUT_S."""
        process = self.process
        assert process is not None, "server is not running"
        try:
            code = process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._dump_stacks_and_kill()
            pytest.fail(
                f"moldau server did not exit within {STOP_TIMEOUT_S:.0f}s of signal "
                f"{signal.Signals(signal_number).name} (killed); "
                f"output with its threads' stacks:\n{self.output_tail(150)}"
            )
        if self._reader is not None:
            self._reader.join(5)
        self.process = None
        assert code == 0, (
            f"moldau server exited with code {code} after {signal.Signals(signal_number).name}; "
            f"output:\n{self.output_tail()}"
        )
        return code

    def wait_exited(self, timeout_s: float) -> int:
        """A process expected to exit by itself (a node that halts): its exit code, once it has
        exited within `timeout_s` (else the test fails)."""
        process = self.process
        assert process is not None, "server is not running"
        try:
            code = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"moldau server did not exit within {timeout_s:.0f}s; output:\n{self.output_tail()}"
            )
        if self._reader is not None:
            self._reader.join(5)
        self.process = None
        return code

    def restart(self, **overrides: str) -> MoldauServer:
        """Stop cleanly and start again on the same data directory (the port may change)."""
        self.stop()
        self.overrides.update(overrides)
        return self.start()

    def output_tail(self, lines: int = 60) -> str:
        return "".join(self._lines[-lines:]) or "(no output)"

    def _follow_output(self) -> None:
        process = self.process
        assert process is not None and process.stdout is not None
        with open(self.log_path, "a", encoding="utf-8") as log:
            for raw in iter(process.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                self._lines.append(line)
                log.write(line)
                log.flush()
                if not self._ready.is_set():
                    match = READY_LINE.search(line)
                    if match:
                        self.host = match.group("host")
                        self.port = int(match.group("port"))
                        self._ready.set()

    def _dump_stacks_and_kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        if self._reader is not None:
            self._reader.join(5)

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def _exit_code_text(self) -> str:
        return "?" if self.process is None else str(self.process.returncode)


ServerFactory = Callable[..., MoldauServer]


# What every test server runs with unless a test says otherwise, as Kafka's own development
# config/server.properties: a new group's first join is not held back 3 s for more members.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def _server_factory(base: Path) -> Iterator[ServerFactory]:
    servers: list[MoldauServer] = []

    def start(
        *,
        arguments: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
        working_dir: Path | None = None,
        isolated: bool = True,
        launch_only: bool = False,
        open_files_limit: int | None = None,
        namespace: str | None = None,
        program: Sequence[str] | None = None,
        **overrides: str,
    ) -> MoldauServer:
        index = len(servers)
        directory = base / f"server-{index}"
        directory.mkdir(parents=True, exist_ok=True)
        properties = {key.replace("_", "."): value for key, value in overrides.items()}
        if isolated:
            properties = {**TEST_DEFAULTS, **properties}
        server = MoldauServer(
            data_dir=directory / "data",
            log_path=directory / "server.log",
            overrides=properties,
            arguments=arguments,
            environment=environment,
            working_dir=working_dir,
            isolated=isolated,
            open_files_limit=open_files_limit,
            namespace=namespace,
            program=program,
        )
        servers.append(server)
        return server.launch() if launch_only else server.start()

    try:
        yield start
    finally:
        # Every server the test left running stops at once (a cluster stops in about a second;
        # one node after the other, the last waits for a quorum that has gone).
        problems = []
        stopping = []
        for server in servers:
            if server.process is None:
                continue
            try:
                server.signal_stop()
                stopping.append(server)
            except BaseException as error:  # died during the test: report after the others
                problems.append(error)
        for server in stopping:
            try:
                server.wait_stopped()
            except BaseException as error:  # keep stopping the others, then report
                server._kill()
                problems.append(error)
        if problems:
            raise problems[0]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[ServerFactory]:
    """Factory: `start_server(num_partitions="3")` starts a server for this test only.

    Keyword names are property names with dots written as underscores.
    """
    yield from _server_factory(tmp_path)


@pytest.fixture(scope="module")
def module_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    yield from _server_factory(tmp_path_factory.mktemp("moldau"))


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> MoldauServer:
    """One server shared by the tests of a module (each test uses its own topics)."""
    return module_server_factory()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_tool(name: str, hint: str) -> str:
    """Path of an executable the tests need: skip without it, but fail in CI."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed ({hint}); run scripts/setup.sh"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def kafka_jvm() -> KafkaJvm:
    """Apache Kafka 4.1's JVM clients and tools (`tests/integration/kafka_jvm.py`)."""
    return KafkaJvm.of(KAFKA_4_1)


@pytest.fixture(scope="session")
def kcat() -> str:
    return require_tool("kcat", "Debian package kcat")


@pytest.fixture(scope="session")
def node() -> str:
    path = require_tool("node", "Node.js 20")
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        message = f"kafkajs is not installed in {JS_DIR}; run scripts/setup.sh"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path
