"""The `moldau` command: a typer app with one sub-command group per module (noun, then verb).

Command groups register themselves on `app` through their module's `register(app)`. A command
line imports only the module of the command it names (`moldau topic list` never loads the
controller or the broker), which keeps a command's start-up near a third of a second; the root's
help, a typo and `app` used as a library register every module. `moldau server` lives in
`moldau/cli/server.py` (owned by the broker) and is attached when that module is importable.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final

import click
import rich.markup
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


# Each command (or command group) and the module that defines it with `register(app)`.
_COMMAND_MODULES: Final = {
    "server": "server",
    "storage": "storage",
    "topic": "topic",
    "produce": "produce",
    "schema": "schema",
    "consume": "consume",
    "group": "group",
    "cluster": "cluster",
    "config": "cluster",
    "client-metrics": "client_metrics",
    "feature": "feature",
    "perf": "perf",
    "user": "user",
    "quota": "quota",
    "acl": "acl",
    "console": "console",
}
_registered: set[str] = set()


@app.command("version")
def version_command() -> None:
    """Print Moldau's version."""
    typer.echo(_installed_version())


def register_commands(modules: Iterable[str] = _COMMAND_MODULES.values()) -> typer.Typer:
    """Register the commands of `modules` (default: all) on `app` once each; a module not
    written yet is skipped."""
    for name in dict.fromkeys(modules):
        if name in _registered:
            continue
        _registered.add(name)
        try:
            module = importlib.import_module(f"moldau.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"moldau.cli.{name}":
                raise
            continue
        module.register(app)
    return app


def modules_for(arguments: Sequence[str]) -> list[str]:
    """The modules a command line needs: the named command's, or every one when it names none
    (the root's help lists them all; a misspelt command is answered with the close names)."""
    named = next((argument for argument in arguments if not argument.startswith("-")), None)
    if named == "version":
        return []
    if named in _COMMAND_MODULES:
        return [_COMMAND_MODULES[named]]
    return list(_COMMAND_MODULES.values())


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
    "registry": "URL",
    "registry_user": "USER:PASSWORD",
    "registry_ca": "FILE",
    "value_schema": "SCHEMA",
    "key_schema": "SCHEMA",
    "command_config": "FILE",
    "listen": "HOST:PORT",
    "refresh": "SECONDS",
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


def _as_text(help_text: str | None) -> str | None:
    """Help is rendered as rich markup, which would take `[password=...]` for a tag and drop it:
    brackets in help are text."""
    return rich.markup.escape(help_text) if help_text else help_text


def readable_help(command: click.Command) -> None:
    """Give every option and argument a placeholder a person reads (`COUNT`, `KEY=VALUE`)
    instead of typer's Python types (`<int>`, `<list[str]>`); flags show none. Help text is
    shown as written (see `_as_text`)."""
    command.help = _as_text(command.help)
    command.short_help = _as_text(command.short_help)
    for parameter in command.params:
        if isinstance(parameter, TyperOption | TyperArgument):
            parameter.help = _as_text(parameter.help)
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
        command.context_class(command, help_option_names=["-h", "--help"])
    )
    if help_option is not None:  # built on first use and kept: settle its placeholder now
        help_option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


def main() -> None:
    """Console-script entry point."""
    register_commands(modules_for(sys.argv[1:]))
    command: Any = typer.main.get_command(app)
    readable_help(command)
    command(prog_name="moldau")
