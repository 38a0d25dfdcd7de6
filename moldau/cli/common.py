"""What every command shares: the connection options, output formats, and one-line errors.

Options: `-b/--bootstrap-server` (else `MOLDAU_BROKERS`, else 127.0.0.1:9092), repeated
`-X key=value` client settings, `--format text|json|yaml`. `run(coroutine)` runs a command's async
body and turns failures into one line on stderr with a hint and an exit code (see `ExitCode`);
a user mistake never prints a traceback.
"""

from __future__ import annotations

import asyncio
import difflib
import enum
import json
import os
import re
import sys
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from moldau.client.config import DEFAULT_BOOTSTRAP, ClientConfig
from moldau.client.errors import ConfigException, ErrorCode, KafkaException
from moldau.config.values import read_properties_file

__all__ = [
    "BootstrapOption",
    "CommandConfigOption",
    "ExitCode",
    "FormatOption",
    "OutputFormat",
    "SettingsOption",
    "client_config",
    "counted",
    "emit",
    "fail",
    "parse_key_values",
    "run",
]

T = TypeVar("T")

BROKERS_ENV: Final = "MOLDAU_BROKERS"

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class ExitCode(enum.IntEnum):
    OK = 0
    KAFKA_ERROR = 1  # the cluster refused the operation (unknown topic, invalid config, ...)
    USAGE = 2  # bad arguments or settings (click uses 2 for usage errors too)
    UNREACHABLE = 3  # no broker could be reached, or it did not answer in time
    IN_PROGRESS = 4  # what was asked about is not finished yet (`cluster reassign verify`)
    NOT_AUTHENTICATED = 5  # the listener refused the login (user, password, mechanism, no SASL)
    NOT_AUTHORIZED = 6  # the principal lacks a permission (an ACL) for what was asked
    INTERRUPTED = 130


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"
    yaml = "yaml"


BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "-b",
        "--bootstrap-server",
        envvar=BROKERS_ENV,
        help=f"Brokers to bootstrap from, host:port[,host:port] (default {DEFAULT_BOOTSTRAP}).",
        show_default=False,
    ),
]
BootstrapControllerOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-controller",
        help="Ask the controllers instead of brokers, host:port[,host:port] of their "
        "controller listeners (KIP-919).",
        show_default=False,
    ),
]
SettingsOption = Annotated[
    list[str] | None,
    typer.Option("-X", help="A client setting key=value (repeatable), e.g. -X linger.ms=50."),
]
CommandConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        help="A properties file of client settings (TLS, SASL), as Kafka's tools take it; "
        "-X settings override it.",
        show_default=False,
    ),
]
FormatOption = Annotated[
    OutputFormat, typer.Option("--format", help="Output format.", case_sensitive=False)
]


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    stderr.print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(int(code))


def counted(count: int, noun: str) -> str:
    """`1 record`, `2 records`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def parse_key_values(
    items: Sequence[str] | None, *, what: str, flag: str, example: str = "retention.ms=60000"
) -> dict[str, str]:
    """`["a=1", "b=2"]` as a dict; a malformed item exits with a usage error."""
    result: dict[str, str] = {}
    for item in items or ():
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            fail(f"{what} '{item}' is not key=value (example: {flag} {example})")
        result[name.strip()] = value
    return result


def client_config(
    bootstrap: str | None,
    settings: Sequence[str] | None,
    *,
    command_config: Path | None = None,
    **defaults: Any,
) -> ClientConfig:
    """Client settings from -b / MOLDAU_BROKERS, -X and a --command-config properties file,
    over per-command defaults."""
    values: dict[str, Any] = {"client.id": "moldau-cli"}
    values.update({name.replace("_", "."): value for name, value in defaults.items()})
    if command_config is not None:
        try:
            values.update(read_properties_file(str(command_config)))
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read --command-config {command_config}: {exc}")
    values.update(parse_key_values(settings, what="setting", flag="-X", example="linger.ms=50"))
    servers = bootstrap or os.environ.get(BROKERS_ENV) or values.get("bootstrap.servers")
    values["bootstrap.servers"] = servers or DEFAULT_BOOTSTRAP
    try:
        config = ClientConfig(values)
        _ = config.bootstrap_servers
    except ConfigException as exc:
        fail(str(exc))
    return config


_TOO_LARGE_HINT: Final = (
    "raise the topic's max.message.bytes (`moldau topic alter-config NAME -c "
    "max.message.bytes=BYTES`) or the broker's message.max.bytes (`moldau config set "
    "message.max.bytes=BYTES`)"
)
_HINTS: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.unknown_topic_or_partition: "list topics with `moldau topic list`",
    ErrorCode.topic_already_exists: "see it with `moldau topic describe NAME`",
    ErrorCode.invalid_config: "`moldau topic describe NAME` lists a topic's configs",
    ErrorCode.invalid_topic_exception: "topic names use letters, digits, '.', '_' and '-' (max 249)",
    ErrorCode.invalid_partitions: "give a partition count above the current one",
    ErrorCode.invalid_replication_factor: "the replication factor cannot exceed the broker count",
    ErrorCode.group_id_not_found: "list groups with `moldau group list`",
    ErrorCode.non_empty_group: "stop the group's consumers first",
    ErrorCode.offset_out_of_range: "see the valid range with `moldau topic describe NAME`",
    ErrorCode.policy_violation: "the broker's policy refused it",
    ErrorCode.unsupported_version: "the broker does not support this operation",
    ErrorCode.topic_authorization_failed: "the principal lacks permission on the topic",
    ErrorCode.group_authorization_failed: "the principal lacks permission on the group",
    ErrorCode.cluster_authorization_failed: "the principal lacks cluster permission",
    ErrorCode.security_disabled: "ACLs need an authorizer: set the broker's authorizer.class.name",
    ErrorCode.message_too_large: _TOO_LARGE_HINT,
    ErrorCode.record_list_too_large: _TOO_LARGE_HINT,
}
_BROKER_CONFIG_HINT: Final = "`moldau config describe` lists the broker configs"

# "topic 'x'" plus a verb reads better than the bare code for the commonest mistakes.
_SUBJECT: Final = re.compile(r"(topic|group|broker) '[^']*'")
_SUBJECT_VERBS: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.unknown_topic_or_partition: "does not exist",
    ErrorCode.group_id_not_found: "does not exist",
    ErrorCode.topic_already_exists: "already exists",
    ErrorCode.non_empty_group: "still has active members",
}
_UNKNOWN_CONFIG: Final = re.compile(r"Unknown (?P<scope>topic|broker) config name: (?P<name>\S+)")

_OTHER_PROTOCOL: Final = re.compile(
    r" answers (HTTP|TLS), not the Kafka protocol|a TLS listener does that to a plaintext client"
)
_UNREACHABLE: Final = frozenset({ErrorCode.network_exception, ErrorCode.request_timed_out})
_LOGIN_HINTS: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.sasl_authentication_failed: "check -X sasl.username, -X sasl.password and "
    "-X sasl.mechanism",
    ErrorCode.unsupported_sasl_mechanism: "set -X sasl.mechanism to one the listener enables",
    ErrorCode.illegal_sasl_state: "give -X security.protocol=SASL_SSL (or SASL_PLAINTEXT), "
    "-X sasl.mechanism, -X sasl.username and -X sasl.password",
}
_NOT_AUTHORIZED: Final = frozenset(
    {
        ErrorCode.topic_authorization_failed,
        ErrorCode.group_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.delegation_token_authorization_failed,
    }
)


def closest_config_name(name: str, scope: str) -> str | None:
    """The known topic or broker config name closest to a misspelt one."""
    from moldau.config.definitions import BROKER_KEYS, TOPIC_KEYS

    known = TOPIC_KEYS if scope == "topic" else BROKER_KEYS
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return close[0] if close else None


def explain(
    exc: KafkaException, hints: Mapping[ErrorCode, str] | None = None
) -> tuple[str, ExitCode]:
    """One line: what the cluster said (the error's name in brackets), then what to do. `hints`
    replace the usual ones where a command knows better (`topic create`: no topic to describe)."""
    if exc.code in _LOGIN_HINTS:
        text = (exc.message or exc.name).rstrip(".")
        return (
            f"authentication failed: {text} ({exc.name}); {_LOGIN_HINTS[exc.code]}",
            ExitCode.NOT_AUTHENTICATED,
        )
    if exc.code is ErrorCode.mismatched_endpoint_type:
        return (
            f"{exc.message or exc.name} ({exc.name}); give a broker listener with -b HOST:PORT "
            "(controller listeners are for --bootstrap-controller)",
            ExitCode.USAGE,
        )
    if exc.code in _UNREACHABLE and exc.message and _OTHER_PROTOCOL.search(exc.message):
        return (
            f"{exc.message.removeprefix('no broker reachable: ')}; give the address of a "
            "plaintext Kafka listener with -b HOST:PORT",
            ExitCode.UNREACHABLE,
        )
    if exc.code in _UNREACHABLE:
        hint = f"Is the server running? Set the address with -b HOST:PORT or {BROKERS_ENV}."
        return f"{(exc.message or exc.name).rstrip('.')}. {hint}", ExitCode.UNREACHABLE
    text = exc.message or ""
    subject, _, detail = text.partition(": ")
    verb = _SUBJECT_VERBS.get(exc.code)
    if verb and _SUBJECT.fullmatch(subject):
        text = f"{subject} {verb}"  # the broker's own words would only repeat it
    hints = {**_HINTS, **(hints or {})}
    fix = hints.get(exc.code)
    unknown = _UNKNOWN_CONFIG.search(detail or text)
    if unknown is not None:
        scope, name = unknown["scope"], unknown["name"]
        text = f"{subject + ': ' if _SUBJECT.fullmatch(subject) else ''}unknown {scope} config '{name}'"
        close = closest_config_name(name, scope)
        suggestion = f"did you mean '{close}'? " if close else ""
        listing = _BROKER_CONFIG_HINT if scope == "broker" else hints[ErrorCode.invalid_config]
        fix = f"{suggestion}{listing}"
    elif exc.code is ErrorCode.invalid_config and subject.startswith("broker '"):
        fix = _BROKER_CONFIG_HINT
    named = re.fullmatch(r"topic '([^']*)'", subject)
    if fix and named:
        fix = fix.replace("NAME", named[1])
    message = f"{text.rstrip('.')} ({exc.name})" if text else exc.name
    code = ExitCode.NOT_AUTHORIZED if exc.code in _NOT_AUTHORIZED else ExitCode.KAFKA_ERROR
    return (f"{message}; {fix}" if fix else message), code


def run(coroutine: Coroutine[Any, Any, T], hints: Mapping[ErrorCode, str] | None = None) -> T:
    """Run a command body; map client errors to one line on stderr and an exit code (`hints`:
    see `explain`)."""
    try:
        return asyncio.run(coroutine)
    except KafkaException as exc:
        message, code = explain(exc, hints)
        fail(message, code)
    except ConfigException as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BrokenPipeError:
        # The reader of our output went away (`| head`); that is not an error.
        sys.stderr.close()
        raise typer.Exit(0) from None


# --- output ------------------------------------------------------------------------------------


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    plain = (
        text
        and text.strip() == text
        and text.lower() not in ("null", "true", "false", "yes", "no", "~")
        and text[0] not in "-?:,[]{}#&*!|>'\"%@`"
        and ": " not in text
        and " #" not in text
        and "\n" not in text
    )
    if plain:
        try:
            float(text)
        except ValueError:
            return text
    return json.dumps(text)


def to_yaml(value: Any, indent: int = 0) -> str:
    """A small YAML emitter for the plain data (dicts, lists, scalars) commands print."""
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return pad + "{}\n"
        lines = []
        for key, item in value.items():
            if isinstance(item, Mapping | list) and item:
                lines.append(f"{pad}{_yaml_scalar(key)}:\n{to_yaml(item, indent + 2)}")
            else:
                rendered = (
                    "[]"
                    if isinstance(item, list)
                    else "{}"
                    if isinstance(item, Mapping)
                    else _yaml_scalar(item)
                )
                lines.append(f"{pad}{_yaml_scalar(key)}: {rendered}\n")
        return "".join(lines)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        lines = []
        for item in value:
            if isinstance(item, Mapping | list) and item:
                nested = to_yaml(item, indent + 2)
                lines.append(f"{pad}- {nested.lstrip()}")
            else:
                lines.append(f"{pad}- {_yaml_scalar(item)}\n")
        return "".join(lines)
    return pad + _yaml_scalar(value) + "\n"


def emit(data: Any, output: OutputFormat, text: Any = None) -> None:
    """Print `data` as JSON/YAML, or `text` (a string or a rich renderable) for humans."""
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    elif output is OutputFormat.yaml:
        sys.stdout.write(to_yaml(data))
    elif isinstance(text, str):
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    elif text is not None:
        stdout.print(text)


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded like Kafka's tools print them (space separated, left aligned); on a
    terminal, a rich table with the same columns."""
    if stdout.is_terminal:
        with stdout.capture() as capture:
            stdout.print(rich_table(headers, rows))
        return capture.get().rstrip("\n")
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        " ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells
    )


def rich_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
) -> Table:
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*("-" if c is None else str(c) for c in row))
    return table
