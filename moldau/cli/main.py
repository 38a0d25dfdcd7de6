"""The `moldau` command: a typer app with one sub-command group per module (noun, then verb).

Command groups register themselves on `app`. `moldau server` lives in `moldau/cli/server.py` (owned
by the broker) and is attached through its `register(app)` when that module is importable.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Final

import click
import typer
from typer.core import TyperArgument, TyperOption

app = typer.Typer(
    name="moldau",
    help="Moldau: a Kafka-compatible streaming platform. Commands are noun then verb.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moldau")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_installed_version())
        raise typer.Exit()


@app.callback()
def root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print Moldau's version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
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
    "acl",
)


@app.command("version")
def version_command() -> None:
    """Print Moldau's version."""
    typer.echo(_installed_version())


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


# Placeholders a person reads in help, where the option's own name would not say it.
_PLACEHOLDERS: Final = {
    "bootstrap_server": "HOST:PORT",
    "bootstrap": "HOST:PORT",
    "bootstrap_controller": "HOST:PORT",
    "settings": "KEY=VALUE",
    "header": "KEY=VALUE",
    "config": "KEY=VALUE",
    "override": "KEY=VALUE",
    "pairs": "KEY=VALUE",
    "format_string": "FORMAT",
}


def _placeholder(parameter: click.Parameter) -> str:
    name = parameter.name or ""
    if name in _PLACEHOLDERS:
        return _PLACEHOLDERS[name]
    options: list[str] = list(getattr(parameter, "opts", []) or [name])
    longest = max(options, key=len).lstrip("-")
    return longest.replace("_", "-").upper()


def _no_type(ctx: click.Context) -> None:
    return None


def readable_help(command: click.Command) -> None:
    """Give every option and argument a placeholder a person reads (`COUNT`, `KEY=VALUE`)
    instead of typer's Python types (`<int>`, `<list[str]>`); flags show none."""
    for parameter in command.params:
        if parameter.metavar is not None:
            continue
        if isinstance(parameter, TyperOption):
            if parameter.is_flag or parameter.count:
                parameter.metavar = ""
            elif not parameter.type_descriptor.is_choice:
                parameter.metavar = _placeholder(parameter)
        elif isinstance(parameter, TyperArgument):
            placeholder = _placeholder(parameter)
            # A repeated argument is named in the singular; help adds "..." after it.
            parameter.metavar = (
                placeholder.removesuffix("S") if parameter.nargs != 1 else placeholder
            )
            parameter.display_type_rich = _no_type
    help_option = command.get_help_option(
        click.Context(command, help_option_names=["-h", "--help"])
    )
    if help_option is not None:  # built on first use and kept: settle its placeholder now
        help_option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


def main() -> None:
    """Console-script entry point."""
    command: Any = typer.main.get_command(app)
    readable_help(command)
    command(prog_name="moldau")
