"""`moldau quota set | delete | describe`: client quotas of users, client ids and IPs, as
kafka-configs manages them (`--entity-type users|clients|ips --entity-name N | --entity-default`
with `--alter --add-config` / `--delete-config`, or `--describe`).

    moldau quota set --user alice producer_byte_rate=1048576 consumer_byte_rate=2097152
    moldau quota set --user alice --client app request_percentage=50
    moldau quota set --client-default producer_byte_rate=524288
    moldau quota set --ip 10.0.0.7 connection_creation_rate=20
    moldau quota delete --user alice producer_byte_rate
    moldau quota describe [--user alice] [--client app] [--ip-default]

An entity is a user and/or a client id, or an IP; each is named (`--user alice`) or the default
of its type (`--user-default`, Kafka's `<default>`). `describe` without entity options lists
every quota; with some, the entities of exactly those types (kafka-configs' strict matching).
The broker checks the keys and values (Kafka's rules, INVALID_REQUEST otherwise).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from moldau.cli.common import (
    BootstrapOption,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    emit,
    fail,
    parse_key_values,
    run,
)
from moldau.client.admin import AdminClient
from moldau.client.quotas import ClientQuotaEntity, QuotaAlteration

quota_app = typer.Typer(
    help="Client quotas of users, client ids and IPs (kafka-configs --entity-type "
    "users|clients|ips).",
    no_args_is_help=True,
)

UserOption = Annotated[str | None, typer.Option("--user", help="A user (principal name).")]
UserDefaultOption = Annotated[
    bool, typer.Option("--user-default", help="The default user (<default>).")
]
ClientOption = Annotated[str | None, typer.Option("--client", help="A client id.")]
ClientDefaultOption = Annotated[
    bool, typer.Option("--client-default", help="The default client id (<default>).")
]
IpOption = Annotated[str | None, typer.Option("--ip", help="A client IP address.")]
IpDefaultOption = Annotated[bool, typer.Option("--ip-default", help="The default IP (<default>).")]


NamedOrDefault = tuple[str | None, bool]  # (--user NAME, --user-default), for each type


def entity_of(
    *, user: NamedOrDefault, client: NamedOrDefault, ip: NamedOrDefault
) -> dict[str, str | None]:
    """The entity the options name (type -> name, None for a type's default); a usage error
    for a name given with its type's default, or an IP with a user or client id."""
    entity: dict[str, str | None] = {}
    for kind, (name, default), flag in (
        ("user", user, "--user"),
        ("client-id", client, "--client"),
        ("ip", ip, "--ip"),
    ):
        if name is not None and default:
            fail(f"give {flag} NAME or {flag}-default, not both")
        if name is not None:
            if not name:
                fail(f"{flag} needs a name (or use {flag}-default)")
            entity[kind] = name
        elif default:
            entity[kind] = None
    if "ip" in entity and len(entity) > 1:
        fail("an IP quota stands alone: give --ip without --user or --client")
    return entity


def entity_text(entity: ClientQuotaEntity) -> str:
    """`user 'alice', client-id 'app'`; a default as `the default user`."""
    return ", ".join(
        f"the default {kind}" if name is None else f"{kind} '{name}'"
        for kind, name in entity.items()
    )


def _required(entity: dict[str, str | None]) -> dict[str, str | None]:
    if not entity:
        fail(
            "name the entity: --user NAME | --user-default, --client NAME | --client-default "
            "(alone or with a user), or --ip ADDRESS | --ip-default"
        )
    return entity


@quota_app.command("set")
def set_quotas(
    pairs: Annotated[
        list[str],
        typer.Argument(
            help="Quota key=value: producer_byte_rate, consumer_byte_rate, request_percentage, "
            "controller_mutation_rate; connection_creation_rate for an IP.",
            show_default=False,
        ),
    ],
    user: UserOption = None,
    user_default: UserDefaultOption = False,
    client: ClientOption = None,
    client_default: ClientDefaultOption = False,
    ip: IpOption = None,
    ip_default: IpDefaultOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Set quotas of an entity (kafka-configs --alter --add-config)."""
    entity = _required(
        entity_of(user=(user, user_default), client=(client, client_default), ip=(ip, ip_default))
    )
    values: dict[str, float] = {}
    for key, text in parse_key_values(
        pairs,
        what="quota",
        flag="moldau quota set --user alice",
        example="producer_byte_rate=1048576",
    ).items():
        try:
            values[key] = float(text)
        except ValueError:
            fail(f"quota {key}={text}: the value is not a number")
    set_values = QuotaAlteration(entity, values)
    _alter(set_values, {"set": values}, bootstrap=bootstrap, settings=settings, output=output)


@quota_app.command("delete")
def delete_quotas(
    keys: Annotated[list[str], typer.Argument(help="Quota keys to remove.", show_default=False)],
    user: UserOption = None,
    user_default: UserDefaultOption = False,
    client: ClientOption = None,
    client_default: ClientDefaultOption = False,
    ip: IpOption = None,
    ip_default: IpDefaultOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Remove quotas of an entity (kafka-configs --alter --delete-config)."""
    entity = _required(
        entity_of(user=(user, user_default), client=(client, client_default), ip=(ip, ip_default))
    )
    alteration = QuotaAlteration(entity, {}, list(keys))
    deleted = {"deleted": list(keys)}
    _alter(alteration, deleted, bootstrap=bootstrap, settings=settings, output=output)


def _alter(
    alteration: QuotaAlteration,
    done: dict[str, Any],
    *,
    bootstrap: str | None,
    settings: list[str] | None,
    output: OutputFormat,
) -> None:
    """Send one alteration; print what was done (`done`, with the entity, as data)."""
    client_settings = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client_settings) as admin:
            await admin.alter_client_quotas([alteration])
        emit(
            {"entity": alteration.entity, **done},
            output,
            f"Completed updating quota configs for {entity_text(alteration.entity)}.",
        )

    run(body())


@quota_app.command("describe")
def describe_quotas(
    user: UserOption = None,
    user_default: UserDefaultOption = False,
    client: ClientOption = None,
    client_default: ClientDefaultOption = False,
    ip: IpOption = None,
    ip_default: IpDefaultOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Quotas of an entity, or every quota (kafka-configs --describe)."""
    entity = entity_of(
        user=(user, user_default), client=(client, client_default), ip=(ip, ip_default)
    )
    client_settings = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client_settings) as admin:
            found = await admin.describe_client_quotas(entity, strict=bool(entity))
        ordered = sorted(found, key=lambda item: sorted((k, v or "") for k, v in item[0].items()))
        data: list[dict[str, Any]] = [
            {"entity": quota_entity, "quotas": dict(sorted(values.items()))}
            for quota_entity, values in ordered
        ]
        lines = [
            f"Quota configs for {entity_text(row['entity'])} are "
            + ", ".join(f"{key}={value}" for key, value in row["quotas"].items())
            for row in data
        ]
        emit(data, output, "\n".join(lines) if lines else "No quota configs.")

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(quota_app, name="quota")
