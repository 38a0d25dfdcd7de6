"""The `moldau` command: a typer app with one sub-command group per module (noun, then verb).

Command groups register themselves on `app`. `moldau server` lives in `moldau/cli/server.py` (owned
by the broker) and is attached through its `register(app)` when that module is importable.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="moldau",
    help="Moldau: a Kafka-compatible streaming platform. Commands are noun then verb.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root() -> None:
    """Moldau: a Kafka-compatible streaming platform. Commands are noun then verb."""


# Each module defines `register(app)`; a module not written yet is skipped.
_COMMAND_MODULES = (
    "server",
    "storage",
    "topic",
    "produce",
    "consume",
    "group",
    "cluster",
    "feature",
    "perf",
    "user",
)


@app.command("version")
def version_command() -> None:
    """Print Moldau's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(version("moldau"))
    except PackageNotFoundError:
        typer.echo("unknown")


def _register_commands() -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"moldau.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"moldau.cli.{name}":
                raise
            continue
        module.register(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    app()
