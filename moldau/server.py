"""Running a node: in this process's main thread (`run_server`) or embedded in a background
thread for tests and notebooks (`Server`, a context manager, sync and async).

    with moldau.Server(log_dirs="/tmp/data", port=0) as server:
        print(server.bootstrap_servers)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from moldau.broker.node import Node
from moldau.config.values import BrokerConfig

log = logging.getLogger(__name__)

READY_LINE = "Moldau ready: bootstrap.servers={bootstrap}"
REGISTRY_LINE = "Moldau schema registry: {url}"
HTTP_LINE = "Moldau HTTP: {url} (/metrics, /health, /ready)"
CONTROLLER_READY_LINE = "Moldau ready: bootstrap.controllers={bootstrap}"


class StopError(Exception):
    """The node started and served, but stopping it failed (the cause is chained)."""


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: BrokerConfig, *, print_ready: bool = True) -> None:
    """Start a node, print the ready line, and run until SIGTERM/SIGINT; then stop cleanly. The
    metrics and health endpoints' line comes first: they answer while the node starts."""
    node = Node(config, tune_process=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        for url in await node.start_http():
            if print_ready:
                print(HTTP_LINE.format(url=url), flush=True)
        started = await _start_unless_stopped(node, stop)
    except BaseException:
        with contextlib.suppress(Exception):
            await node.stop()
        raise
    if not started:  # told to stop while starting (a quorum it cannot reach, say)
        log.info("shutting down before the node was ready")
        try:
            await node.stop()
        except Exception as error:
            raise StopError(str(error)) from error
        return
    try:
        if print_ready:
            for url in node.schema_registry.urls:
                print(REGISTRY_LINE.format(url=url), flush=True)
            if node.layout.is_broker:
                print(READY_LINE.format(bootstrap=node.bootstrap_servers), flush=True)
            else:
                print(
                    CONTROLLER_READY_LINE.format(bootstrap=node.bootstrap_controllers), flush=True
                )
        await stop.wait()
        log.info("shutting down")
    finally:
        try:
            await node.stop()
        except Exception as error:
            raise StopError(str(error)) from error


async def _start_unless_stopped(node: Node, stop: asyncio.Event) -> bool:
    """Start the node; False if `stop` was set first (the start is cancelled then): a node
    waiting for its quorum or its registration must still obey SIGTERM."""
    starting = asyncio.ensure_future(node.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if starting.done():
        starting.result()  # (its failure, if it failed)
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await starting
    return False


class Server:
    """A node on its own event loop in a background thread."""

    def __init__(
        self,
        *,
        log_dirs: str | os.PathLike[str] | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        # (no schema registry and no HTTP endpoints unless `config` asks for them: embedded
        # nodes take no fixed port)
        settings: dict[str, Any] = {
            "listeners": f"PLAINTEXT://{host}:{port}",
            "schema.registry.listeners": "",
            "http.listeners": "",
        }
        if log_dirs is not None:
            settings["log.dirs"] = os.fspath(log_dirs)
        settings.update(config or {})
        self.config = BrokerConfig.load(extra=settings, environ={})
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._node: Node | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stop_event: asyncio.Event | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self._node is None:
            raise RuntimeError("the server is not running")
        return self._node.bootstrap_servers

    @property
    def node(self) -> Node:
        if self._node is None:
            raise RuntimeError("the server is not running")
        return self._node

    def start(self) -> Server:
        self._thread = threading.Thread(target=self._run, name="moldau-server", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise RuntimeError(f"Moldau server failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop_event = asyncio.Event()
        node = Node(self.config)
        try:
            await node.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            with contextlib.suppress(Exception):
                await node.stop()
            return
        self._node = node
        self._started.set()
        try:
            await self._stop_event.wait()
        finally:
            await node.stop()

    def stop(self) -> None:
        if self._loop is not None and self._stop_event is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(timeout=30)
        self._thread = None
        self._node = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Server:
        await asyncio.get_running_loop().run_in_executor(None, self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.stop)
