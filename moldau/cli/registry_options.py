"""What `moldau schema`, `produce` and `consume` share to reach the schema registry: the
`-r/--registry` option, registry errors as one line and an exit code, and the values of
`--key-schema`/`--value-schema` (the serializers themselves are in `record_schemas.py`).

A schema option is `FILE` (its type from a `avro:`, `json:` or `protobuf:` prefix, else
Protobuf for a `.proto` file and Avro otherwise), `id:N` (a registered schema) or `latest` (the
latest version of the topic's subject, `TOPIC-key` or `TOPIC-value`, as Confluent's
TopicNameStrategy names it); `consume` also takes `auto`. The registry's modules are imported
only when a command uses them, so `produce` and `consume` start as fast without a schema.
"""

from __future__ import annotations

import ssl
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from moldau.cli.common import ExitCode, fail

if TYPE_CHECKING:
    from moldau.registry.client import RegistryClient
    from moldau.registry.model import SchemaType, StoredSchema

__all__ = [
    "DEFAULT_REGISTRY",
    "KeyReaderOption",
    "KeySchemaOption",
    "RegistryCaOption",
    "RegistryOption",
    "RegistryUserOption",
    "SchemaSpec",
    "ValueReaderOption",
    "ValueSchemaOption",
    "parse_schema_spec",
    "read_schema_file",
    "registry_client",
    "schema_type_of",
    "with_registry",
]

T = TypeVar("T")

REGISTRY_ENV: Final = "MOLDAU_SCHEMA_REGISTRY"
DEFAULT_REGISTRY: Final = "http://127.0.0.1:8081"

RegistryOption = Annotated[
    str | None,
    typer.Option(
        "-r",
        "--registry",
        envvar=REGISTRY_ENV,
        help=f"Schema registry URL(s), comma-separated (default {DEFAULT_REGISTRY}).",
        show_default=False,
    ),
]

RegistryUserOption = Annotated[
    str | None,
    typer.Option(
        "--registry-user",
        envvar=REGISTRY_ENV + "_USER",
        help="USER:PASSWORD for a registry that asks for HTTP basic authentication.",
        show_default=False,
    ),
]
RegistryCaOption = Annotated[
    Path | None,
    typer.Option(
        "--registry-ca",
        envvar=REGISTRY_ENV + "_CA",
        help="PEM file of the authorities an https registry's certificate is checked against "
        "(default: the system's).",
        show_default=False,
    ),
]


def _schema_option(side: str, *, decoding: bool) -> Any:
    """The `--key-schema`/`--value-schema` option of `produce` (encoding) or `consume`."""
    spec = (
        "FILE (avro:FILE, json:FILE, protobuf:FILE name its type), id:N or latest (of the "
        f"topic's subject, TOPIC-{side})"
    )
    if decoding:
        text = f"Decode {side}s from the registry's wire format to JSON, read with this schema: "
        text += f"{spec}, or auto (each record's own)."
    else:
        text = f"{side.capitalize()}s are JSON, encoded with this schema in the registry's "
        text += f"wire format: {spec}; a file's schema is registered."
    return typer.Option(f"--{side}-schema", help=text, show_default=False)


ValueSchemaOption = Annotated[str | None, _schema_option("value", decoding=False)]
KeySchemaOption = Annotated[str | None, _schema_option("key", decoding=False)]
ValueReaderOption = Annotated[str | None, _schema_option("value", decoding=True)]
KeyReaderOption = Annotated[str | None, _schema_option("key", decoding=True)]
_TYPE_PREFIXES: Final = ("avro", "json", "protobuf")
_HINTS: Final = {
    401: "give a user of the cluster with --registry-user USER:PASSWORD",
    40301: "the user lacks the permission on the subject's topic (see `moldau acl list`)",
    40401: "list subjects with `moldau schema list`",
    40402: "list a subject's versions with `moldau schema get SUBJECT --versions`",
    40403: "no schema has that id",
    409: "`moldau schema check` says why; `moldau schema config` shows the level",
    42201: "check the schema's text and its --type",
}


def registry_client(
    url: str | None, user: str | None = None, ca: Path | None = None
) -> RegistryClient:
    """A client for `-r`, `--registry-user`, `--registry-ca` (a bad one exits 2)."""
    from moldau.registry.client import RegistryClient

    if user is not None and ":" not in user:
        fail("--registry-user is USER:PASSWORD")
    context = None
    if ca is not None:
        try:
            context = ssl.create_default_context(cafile=str(ca))
        except (OSError, ssl.SSLError) as error:
            fail(f"--registry-ca {ca}: cannot load its certificates: {error}")
    try:
        return RegistryClient(url or DEFAULT_REGISTRY, user_info=user, ssl_context=context)
    except ValueError as error:
        fail(f"--registry: {error}")


async def with_registry(work: Coroutine[Any, Any, T]) -> T:
    """`work`, with what the registry answered instead of a result made one line and an
    exit code (1: refused, 3: unreachable)."""
    from moldau.registry.client import RegistryUnreachable
    from moldau.registry.errors import RegistryError

    try:
        return await work
    except RegistryError as error:
        hint = _HINTS.get(error.error_code)
        message = f"{error.message.rstrip('.')} (schema registry error {error.error_code})"
        fail(f"{message}; {hint}" if hint else message, ExitCode.KAFKA_ERROR)
    except RegistryUnreachable as error:
        fail(
            f"no schema registry answered: {error}. Is it running? Set its address with -r URL "
            f"or {REGISTRY_ENV}.",
            ExitCode.UNREACHABLE,
        )


def schema_type_of(path: Path | None, given: str | None) -> SchemaType:
    """`given` (any case), else Protobuf for a .proto file, else Avro (Confluent's default)."""
    from moldau.registry.model import SchemaType

    if given is not None:
        try:
            return SchemaType(given.upper())
        except ValueError:
            fail(f"schema type '{given}' is not AVRO, JSON or PROTOBUF")
    if path is not None and path.suffix == ".proto":
        return SchemaType.PROTOBUF
    return SchemaType.AVRO


def read_schema_file(path: Path) -> str:
    try:
        return typer.get_text_stream("stdin").read() if str(path) == "-" else path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read the schema file {path}: {error}")


@dataclass(frozen=True, slots=True)
class SchemaSpec:
    """A `--key-schema`/`--value-schema` value: a file's schema, an id, the subject's latest,
    or (consume) each record's own."""

    schema: StoredSchema | None = None  # a file's, with id 0
    schema_id: int | None = None
    latest: bool = False
    auto: bool = False


def parse_schema_spec(text: str, *, option: str, allow_auto: bool = False) -> SchemaSpec:
    if allow_auto and text == "auto":
        return SchemaSpec(auto=True)
    if text == "latest":
        return SchemaSpec(latest=True)
    if text.startswith("id:"):
        number = text.removeprefix("id:")
        if not number.isdigit() or int(number) < 1:
            fail(f"{option} {text}: an id is a positive number (id:42)")
        return SchemaSpec(schema_id=int(number))
    prefix, colon, rest = text.partition(":")
    given = prefix if colon and prefix.lower() in _TYPE_PREFIXES else None
    path = Path(rest if given else text)
    if not path.is_file():
        choices = "FILE, id:N, latest" + (" or auto" if allow_auto else "")
        fail(f"{option} {text}: no such file (give {choices})")
    from moldau.registry.model import StoredSchema

    schema_type = schema_type_of(path, given)
    return SchemaSpec(
        schema=StoredSchema(schema_id=0, schema_type=schema_type, text=read_schema_file(path))
    )
