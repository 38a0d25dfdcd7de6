"""`ConsoleServer`: the console's HTTP listener (uvicorn on the caller's event loop) in front of
the app and its `ClusterConsole`.

    async with ConsoleServer(settings, host="127.0.0.1", port=8080) as console:
        print(console.url)
        await console.serve()  # until stop() (the CLI calls it on SIGINT or SIGTERM)

The listen address defaults to loopback: the console has no login of its own, and anyone who
reaches it acts on the cluster with the console's credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, Self

import uvicorn

from moldau.console.app import build_app
from moldau.console.backend import ClusterConsole
from moldau.console.problems import problem_of
from moldau.console.security import CsrfToken, allowed_hosts
from moldau.http_server import HttpLimits, HttpListener, bind, start_http_server

__all__ = ["DEFAULT_LISTEN", "ConsoleServer", "parse_listen"]

DEFAULT_LISTEN: Final = "127.0.0.1:8080"
# What one browser may make the console hold: a request head within 64 KiB, arriving within 5 s.
LIMITS: Final = HttpLimits(keep_alive_s=30, max_head_bytes=64 * 1024, head_timeout_s=5.0)


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8080` for IPv6; port 0: any free port); ValueError saying what is
    expected."""
    host, colon, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {text!r} is not HOST:PORT (example: 127.0.0.1:8080)")
    return host, int(port)


class ConsoleServer:
    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        host: str,
        port: int,
        refresh_seconds: float = 2.0,
    ) -> None:
        self.backend = ClusterConsole(settings)
        self.host = host
        self.port = port
        self.refresh_seconds = refresh_seconds
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> None:
        """Bind the listener (OSError when it cannot be bound) and start serving."""
        sock = bind(HttpListener(self.host, self.port))
        self._socket = sock
        self.port = sock.getsockname()[1]
        app = build_app(
            self.backend,
            csrf=CsrfToken(),
            allowed_hosts=allowed_hosts(self.host),
            refresh_seconds=self.refresh_seconds,
        )
        self._server = await start_http_server(app, sock, limits=LIMITS)

    async def serve(self) -> None:
        """Serve until `stop()`."""
        assert self._server is not None, "start() first"
        await self._server.main_loop()

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    async def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._server.shutdown(sockets=None)
            self._server = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        await self.backend.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def check_cluster(self, timeout_s: float = 5.0) -> str | None:
        """None when the cluster answers DescribeCluster in time, else why not (the console
        serves anyway, and its pages say the same until the cluster answers)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.backend.admin.describe_cluster()
        except Exception as error:
            problem = problem_of(error)
            return f"{problem.title.lower()}: {problem.message}"
        return None
