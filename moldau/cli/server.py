"""`moldau server`: run a node with Kafka-named properties.

Configuration, lowest to highest precedence: defaults, `-c server.properties`,
`MOLDAU_<PROPERTY>` environment variables, repeated `--override key=value`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer


def server_command(
    config_file: Annotated[
        Path | None,
        typer.Option("-c", "--config", help="A server.properties file.", exists=True),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", help="Set a property: --override log.dirs=/data (repeatable)."),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING")] = "INFO",
) -> None:
    """Start a Moldau node (a combined single-node cluster by default)."""
    from moldau.config.cluster import ClusterLayout, check_properties, inert_properties
    from moldau.config.values import BrokerConfig, ConfigError
    from moldau.server import StopError, install_event_loop_policy, serve

    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = BrokerConfig.load(
            properties_file=str(config_file) if config_file else None, overrides=override or []
        )
        for warning in check_properties(config):
            logging.getLogger("moldau.config").warning("%s", warning)
        for note in inert_properties(config):
            logging.getLogger("moldau.config").info("%s", note)
        ClusterLayout.from_config(config)
    except (ConfigError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    install_event_loop_policy()
    try:
        asyncio.run(serve(config))
    except StopError as exc:
        logging.getLogger("moldau.server").error("stopping failed", exc_info=exc.__cause__)
        typer.echo(f"error: the server did not stop cleanly: {exc}", err=True)
        raise typer.Exit(1) from None
    except (ValueError, OSError) as exc:
        typer.echo(f"error: cannot start the server: {exc}", err=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    app.command("server")(server_command)
