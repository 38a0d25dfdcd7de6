"""The nodes of a running local cluster (`moldau cluster up`): its child processes, each node's
exit reported as it happens (node id, exit code, last log line), and the control channel through
which `moldau cluster node stop | kill | start | restart N` act on one node while the others run.

`cluster up` keeps the nodes as its own children: it signals them by PID and starts one again
with the same arguments. It listens on a Unix socket, `<data-dir>/control.sock` (a name under
the temporary directory when that path is too long for a socket), for one request per
connection, a JSON line `{"action": "kill", "node": 2}`, answered with one JSON line
`{"ok": true, "message": "node 2 killed (exit code -9)"}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from moldau.cli.common import ExitCode, fail

READY_MARK: Final = "Moldau ready:"
STOP_TIMEOUT_S: Final = 60.0
START_TIMEOUT_S: Final = 90.0
ACTIONS: Final = ("stop", "kill", "start", "restart")
_SOCKET_PATH_MAX: Final = 100  # sun_path holds 108 bytes on Linux


@dataclass(frozen=True, slots=True)
class NodeLayout:
    node_id: int
    roles: str
    client_port: int | None
    controller_port: int | None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")


class ChildNode:
    """One `moldau server` child: its process, its log file, whether it printed its ready line."""

    def __init__(self, layout: NodeLayout, arguments: list[str], log_path: Path) -> None:
        self.layout = layout
        self.arguments = arguments
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MOLDAU_")}
        self.ready = asyncio.Event()
        self.process = await asyncio.create_subprocess_exec(
            *self.arguments,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # Ctrl-C reaches the parent only; it stops us in order
        )
        self._pump = asyncio.create_task(self._copy_output(self.process, self.ready))

    async def _copy_output(self, process: asyncio.subprocess.Process, ready: asyncio.Event) -> None:
        assert process.stdout is not None
        with open(self.log_path, "ab") as log:
            async for line in process.stdout:
                log.write(line)
                log.flush()
                if not ready.is_set() and READY_MARK.encode() in line:
                    ready.set()

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, number)  # by PID: only our own child

    async def wait(self) -> int:
        assert self.process is not None
        code = await self.process.wait()
        if self._pump is not None:
            await self._pump
        return code

    async def wait_ready(self, timeout_s: float) -> int | None:
        """None once the node printed its ready line; its exit code if it exited first."""
        ready = asyncio.ensure_future(self.ready.wait())
        exited = asyncio.ensure_future(self.wait())
        try:
            done, _ = await asyncio.wait(
                {ready, exited}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
            exited.cancel()
        if exited in done:
            return exited.result()
        if ready not in done:
            raise TimeoutError(f"node {self.layout.node_id} was not ready in {timeout_s:.0f} s")
        return None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def exit_text(code: int) -> str:
    """`code 1`, or `code -9 (SIGKILL)` for a signal."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"code {code} ({signal.Signals(-code).name})"
    return f"code {code}"


def control_socket(data_dir: Path) -> Path:
    """Where `cluster up` on `data_dir` listens for node commands."""
    path = data_dir / "control.sock"
    if len(str(path)) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"moldau-cluster-{digest}.sock"


class LocalNodes:
    """The supervisor's side: reports exits as they happen, serves the control socket."""

    def __init__(
        self, children: list[ChildNode], data_dir: Path, *, say: Callable[[str], None]
    ) -> None:
        self.children = {child.layout.node_id: child for child in children}
        self.socket_path = control_socket(data_dir)
        self.say = say
        self.closing = False
        self._watchers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def start(self, child: ChildNode) -> None:
        await child.start()
        watcher = asyncio.create_task(self._report_exit(child))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _report_exit(self, child: ChildNode) -> None:
        code = await child.wait()
        if not self.closing:
            last = child.log_tail(1) or "(nothing)"
            self.say(
                f"node {child.layout.node_id} exited with {exit_text(code)}; last log line: {last}"
            )

    async def serve(self) -> None:
        if self.socket_path.exists():
            if _answers(self.socket_path):
                raise OSError(f"another `moldau cluster up` runs here ({self.socket_path})")
            self.socket_path.unlink()
        self._server = await asyncio.start_unix_server(self._serve_one, path=str(self.socket_path))
        os.chmod(self.socket_path, 0o600)

    async def close(self) -> None:
        """Before the final stop: exits are no longer news, and no command is taken."""
        self.closing = True
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(OSError):
                self.socket_path.unlink()
        for watcher in list(self._watchers):
            watcher.cancel()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            ok, message = await self.act(str(request.get("action")), int(request.get("node")))
        except (ValueError, TypeError, AttributeError):
            ok, message = False, "malformed request"
        writer.write((json.dumps({"ok": ok, "message": message}) + "\n").encode())
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()

    async def act(self, action: str, node_id: int) -> tuple[bool, str]:
        child = self.children.get(node_id)
        if child is None:
            return False, f"no node {node_id} (nodes {', '.join(map(str, self.children))})"
        if self.closing:
            return False, "the cluster is stopping"
        if action in ("stop", "kill") and not child.running:
            return False, f"node {node_id} is not running"
        if action == "start" and child.running:
            return False, f"node {node_id} is running"
        if action in ("stop", "restart") and child.running:
            child.signal(signal.SIGTERM)
            try:
                code = await asyncio.wait_for(child.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                child.signal(signal.SIGKILL)
                code = await child.wait()
            if action == "stop":
                return True, f"node {node_id} stopped (exit {exit_text(code)})"
        if action == "kill":
            child.signal(signal.SIGKILL)
            return True, f"node {node_id} killed (exit {exit_text(await child.wait())})"
        if action in ("start", "restart"):
            await self.start(child)
            try:
                code_before_ready = await child.wait_ready(START_TIMEOUT_S)
            except TimeoutError as error:
                return False, str(error)
            if code_before_ready is not None:
                last = child.log_tail(1)
                return False, (
                    f"node {node_id} exited with {exit_text(code_before_ready)} before it was "
                    f"ready; last log line: {last}"
                )
            return True, f"node {node_id} {action}ed and ready"
        return False, f"unknown action {action!r} ({', '.join(ACTIONS)})"


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


# --- `moldau cluster node ...`: the client side -------------------------------------------------

node_app = typer.Typer(
    help="One node of a local cluster that `moldau cluster up` runs (stop, kill, start, restart).",
    no_args_is_help=True,
)
NodeArgument = Annotated[int, typer.Argument(help="The node id.", show_default=False)]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", "-d", help="The data dir `moldau cluster up` was given.")
]


def ask(data_dir: Path, action: str, node_id: int) -> None:
    path = control_socket(data_dir.resolve())
    request = json.dumps({"action": action, "node": node_id}) + "\n"
    answer: dict[str, Any]
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(STOP_TIMEOUT_S + START_TIMEOUT_S + 10)
        try:
            connection.connect(str(path))
        except OSError:
            fail(
                f"no `moldau cluster up` runs from {data_dir} (nothing answers on {path}); "
                "give its --data-dir",
                ExitCode.UNREACHABLE,
            )
        connection.sendall(request.encode())
        with connection.makefile("rb") as replies:
            answer = json.loads(replies.readline() or b"{}")
    if not answer.get("ok"):
        fail(str(answer.get("message", "no answer")), ExitCode.KAFKA_ERROR)
    typer.echo(answer["message"])


_NODE_COMMANDS: Final = {
    "stop": "Stop one node cleanly (SIGTERM); it stays stopped until `start`.",
    "kill": "Kill one node (SIGKILL), as a crash would; it stays down until `start`.",
    "start": "Start a stopped or killed node again, with its data, and wait until it is ready.",
    "restart": "Stop one node cleanly (if it runs), start it again and wait until it is ready.",
}


def _node_command(action: str) -> Callable[..., None]:
    def command(node_id: NodeArgument, data_dir: DataDirOption = Path("moldau-cluster")) -> None:
        ask(data_dir, action, node_id)

    return command


for _action, _help in _NODE_COMMANDS.items():
    node_app.command(_action, help=_help)(_node_command(_action))
