"""`moldau console -b BOOTSTRAP [--listen HOST:PORT]`: serve the web console (`moldau.console`).

It prints `Moldau console: http://HOST:PORT/` once it is listening and serves until SIGINT or
SIGTERM. The cluster is reached with the same settings as every command (`-b`, `-X`, and
`--command-config` for a properties file of TLS or SASL settings); a cluster that does not
answer at start is a warning, not an exit, since the pages say so until it answers.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from moldau.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    ExitCode,
    SettingsOption,
    client_config,
    fail,
    run,
    stderr,
)
from moldau.console.server import DEFAULT_LISTEN, ConsoleServer, parse_listen


def console_command(
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    command_config: CommandConfigOption = None,
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            help="Address to serve the console on, HOST:PORT (port 0: any free port). "
            "The console has no login: keep it on loopback unless a proxy guards it.",
        ),
    ] = DEFAULT_LISTEN,
    refresh: Annotated[
        float,
        typer.Option("--refresh", min=0.5, max=600, help="Seconds between live updates."),
    ] = 2.0,
) -> None:
    """Serve the web console: cluster, topics, messages and consumer groups in a browser."""
    config = client_config(
        bootstrap, settings, command_config=command_config, client_id="moldau-console"
    )
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        fail(str(exc))

    async def body() -> None:
        server = ConsoleServer(config.as_dict(), host=host, port=port, refresh_seconds=refresh)
        try:
            await server.start()
        except OSError as exc:
            await server.close()
            fail(f"cannot listen on {listen}: {exc.strerror or exc}", ExitCode.USAGE)
        try:
            loop = asyncio.get_running_loop()
            for signal_number in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signal_number, server.stop)
            problem = await server.check_cluster()
            if problem is not None:
                stderr.print(f"warning: {problem}", markup=False)
            print(f"Moldau console: {server.url}", flush=True)
            await server.serve()
        finally:
            await server.close()

    run(body())


def register(root: typer.Typer) -> None:
    root.command("console")(console_command)
