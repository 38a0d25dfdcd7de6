"""`moldau schema register | list | get | check | delete | config`: the schema registry's
subjects, versions and compatibility levels, through Confluent's REST API (`-r URL`).

Text output is for people (`Registered orders-value version 2 (id 7).`, the schema's own text,
a table of subjects); `--format json|yaml` prints the registry's answers as data. `check` exits
1 when the schema is incompatible, as `diff` does when files differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from moldau.cli.common import ExitCode, FormatOption, OutputFormat, emit, fail, plain_table, run
from moldau.cli.registry_options import (
    RegistryCaOption,
    RegistryOption,
    RegistryUserOption,
    read_schema_file,
    registry_client,
    schema_type_of,
    with_registry,
)
from moldau.registry.model import Compatibility, SchemaReference, SchemaType, SubjectVersion

app = typer.Typer(
    help="Register, inspect, check and delete schemas in the schema registry.",
    no_args_is_help=True,
)

SubjectArgument = Annotated[str, typer.Argument(help="Subject name.", show_default=False)]
FileArgument = Annotated[
    Path, typer.Argument(help="Schema file (- for stdin).", show_default=False)
]
TypeOption = Annotated[
    str | None,
    typer.Option(
        "--type",
        "-t",
        help="AVRO, JSON or PROTOBUF (default: PROTOBUF for a .proto file, else AVRO).",
        show_default=False,
    ),
]
ReferenceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--reference",
        help="A schema reference NAME=SUBJECT:VERSION (repeatable), e.g. "
        "com.acme.Address=address-value:1.",
    ),
]
VersionOption = Annotated[
    str | None,
    typer.Option("--version", "-v", help="A version number, or latest.", show_default=False),
]


def _references(items: list[str] | None) -> list[SchemaReference]:
    references = []
    for item in items or ():
        name, equals, rest = item.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not equals or not colon or not name or not subject or not version.isdigit():
            fail(f"--reference '{item}' is not NAME=SUBJECT:VERSION (example: a.B=b-value:1)")
        references.append(SchemaReference(name=name, subject=subject, version=int(version)))
    return references


def _version_json(entry: SubjectVersion) -> dict[str, Any]:
    return {
        "subject": entry.subject,
        "version": entry.version,
        "id": entry.schema.schema_id,
        "schemaType": entry.schema.schema_type.value,
        "schema": entry.schema.text,
        "references": [reference.to_json() for reference in entry.schema.references],
    }


def _readable(text: str, schema_type: SchemaType) -> str:
    """An Avro or JSON schema indented for reading; a .proto file as it is."""
    if schema_type is SchemaType.PROTOBUF:
        return text.rstrip("\n")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


@app.command("register")
def register_command(
    subject: SubjectArgument,
    file: FileArgument,
    schema_type: TypeOption = None,
    reference: ReferenceOption = None,
    normalize: Annotated[
        bool, typer.Option("--normalize", help="Register the schema's normalized form.")
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Register a schema under a subject (a schema already there keeps its version and id)."""
    kind = schema_type_of(file, schema_type)
    text = read_schema_file(file)
    references = _references(reference)
    client = registry_client(registry, registry_user, registry_ca)

    async def body() -> None:
        schema_id = await client.register(
            subject, text, schema_type=kind, references=references, normalize=normalize
        )
        found = await client.lookup(subject, text, schema_type=kind, references=references)
        data = {"subject": subject, "version": found.version, "id": schema_id}
        emit(data, output, f"Registered {subject} version {found.version} (id {schema_id}).")

    run(with_registry(body()))


@app.command("list")
def list_command(
    prefix: Annotated[
        str, typer.Option("--prefix", help="Only subjects whose name starts with this.")
    ] = "",
    deleted: Annotated[
        bool, typer.Option("--deleted", help="Include soft-deleted subjects.")
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List subjects with their latest version, its id and schema type."""
    client = registry_client(registry, registry_user, registry_ca)

    async def body() -> None:
        rows = []
        for subject in await client.subjects(prefix=prefix, deleted=deleted):
            latest = await client.version(subject, deleted=deleted)
            rows.append(
                {
                    "subject": subject,
                    "version": latest.version,
                    "id": latest.schema.schema_id,
                    "schemaType": latest.schema.schema_type.value,
                }
            )
        table = plain_table(
            ["SUBJECT", "VERSION", "ID", "TYPE"],
            [[r["subject"], r["version"], r["id"], r["schemaType"]] for r in rows],
        )
        emit(rows, output, table if rows else "")

    run(with_registry(body()))


@app.command("get")
def get_command(
    subject: Annotated[
        str | None, typer.Argument(help="Subject name (or --id).", show_default=False)
    ] = None,
    version: VersionOption = None,
    schema_id: Annotated[
        int | None, typer.Option("--id", help="A schema id, instead of a subject.")
    ] = None,
    versions: Annotated[
        bool, typer.Option("--versions", help="List the subject's version numbers.")
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Print a subject version's schema (the latest by default), or the schema of an id."""
    if (subject is None) == (schema_id is None):
        fail("give a subject or --id N (one of them)")
    if schema_id is not None and (version is not None or versions):
        fail("--version and --versions go with a subject, not --id")
    client = registry_client(registry, registry_user, registry_ca)

    async def body() -> None:
        if schema_id is not None:
            stored = await client.schema(schema_id)
            data: Any = {
                "id": schema_id,
                "schemaType": stored.schema_type.value,
                "schema": stored.text,
                "references": [reference.to_json() for reference in stored.references],
            }
            emit(data, output, _readable(stored.text, stored.schema_type))
            return
        assert subject is not None
        if versions:
            numbers = await client.versions(subject)
            emit(numbers, output, "\n".join(str(number) for number in numbers))
            return
        entry = await client.version(subject, version or "latest")
        emit(_version_json(entry), output, _readable(entry.schema.text, entry.schema.schema_type))

    run(with_registry(body()))


@app.command("check")
def check_command(
    subject: SubjectArgument,
    file: FileArgument,
    schema_type: TypeOption = None,
    reference: ReferenceOption = None,
    version: VersionOption = None,
    every: Annotated[
        bool,
        typer.Option("--all", help="Check against every version the subject's level names."),
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Check a schema against a subject's compatibility level (exit 1: incompatible)."""
    if every and version is not None:
        fail("give --version or --all, not both")
    kind = schema_type_of(file, schema_type)
    text = read_schema_file(file)
    references = _references(reference)
    client = registry_client(registry, registry_user, registry_ca)

    async def body() -> bool:
        compatible, messages = await client.check(
            subject,
            text,
            schema_type=kind,
            references=references,
            version=None if every else (version or "latest"),
        )
        against = "every version checked" if every else f"version {version or 'latest'}"
        lines = [f"{'Compatible' if compatible else 'Incompatible'} with {subject} {against}."]
        lines += [f"  {message}" for message in messages]
        emit({"is_compatible": compatible, "messages": messages}, output, "\n".join(lines))
        return compatible

    if not run(with_registry(body())):
        raise typer.Exit(int(ExitCode.KAFKA_ERROR))


@app.command("delete")
def delete_command(
    subject: SubjectArgument,
    version: VersionOption = None,
    permanent: Annotated[
        bool,
        typer.Option(
            "--permanent",
            help="Delete for good what was soft-deleted before.",
        ),
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Delete a subject, or one version of it (soft unless --permanent)."""
    client = registry_client(registry, registry_user, registry_ca)

    async def body() -> None:
        if version is None:
            numbers = await client.delete_subject(subject, permanent=permanent)
        else:
            numbers = [await client.delete_version(subject, version, permanent=permanent)]
        how = "Permanently deleted" if permanent else "Deleted"
        listed = ", ".join(str(number) for number in numbers)
        emit(
            {"subject": subject, "versions": numbers, "permanent": permanent},
            output,
            f"{how} {subject} version{'s' if len(numbers) != 1 else ''} {listed}.",
        )

    run(with_registry(body()))


@app.command("config")
def config_command(
    subject: Annotated[
        str | None,
        typer.Argument(help="Subject name (default: the global level).", show_default=False),
    ] = None,
    set_level: Annotated[
        str | None,
        typer.Option(
            "--set",
            help="Set the level: " + ", ".join(level.value for level in Compatibility) + ".",
            show_default=False,
        ),
    ] = None,
    delete: Annotated[
        bool,
        typer.Option("--delete", help="Remove the subject's own level (the global one applies)."),
    ] = False,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show or set the compatibility level of a subject, or the global one."""
    if set_level is not None and delete:
        fail("give --set or --delete, not both")
    if delete and subject is None:
        fail("--delete needs a subject: the global level can be set, not removed")
    if set_level is not None and set_level.upper() not in Compatibility.__members__:
        known = ", ".join(level.value for level in Compatibility)
        fail(f"compatibility level '{set_level}' is not one of {known}")
    client = registry_client(registry, registry_user, registry_ca)
    scope = subject if subject is not None else "the global level"

    async def body() -> None:
        if set_level is not None:
            level = await client.set_compatibility(set_level, subject)
            text = f"Compatibility of {scope} set to {level}."
        elif delete:
            assert subject is not None
            await client.delete_compatibility(subject)
            level = await client.compatibility(subject)
            text = f"{subject} now follows the global level, {level}."
        else:
            level = await client.compatibility(subject)
            text = level
        emit({"subject": subject, "compatibility": level}, output, text)

    run(with_registry(body()))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="schema")
