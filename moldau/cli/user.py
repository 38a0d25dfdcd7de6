"""`moldau user set | delete | describe`: users' SCRAM credentials, as kafka-configs manages them
(`--entity-type users --alter --add-config 'SCRAM-SHA-512=[password=...]'`).

    moldau user set alice 'SCRAM-SHA-512=[password=alice-secret]' ['SCRAM-SHA-256=[...]']
    moldau user delete alice SCRAM-SHA-512
    moldau user describe [alice ...]

`set` salts the password here (8192 iterations unless `iterations=` says otherwise, as
kafka-configs does) and sends AlterUserScramCredentials; the password never reaches the broker.
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
    plain_table,
    run,
)
from moldau.cli.scram_settings import ScramSettingError, parse_scram_setting
from moldau.client.admin import AdminClient
from moldau.client.scram_users import DEFAULT_ITERATIONS, ScramDeletion, ScramUpsertion
from moldau.protocol.sasl.scram import HASHES

user_app = typer.Typer(help="Users' SCRAM credentials (kafka-configs --entity-type users).")


@user_app.command("set")
def set_credentials(
    name: Annotated[str, typer.Argument(help="The user.")],
    credentials: Annotated[
        list[str],
        typer.Argument(help="'SCRAM-SHA-512=[password=...]' (iterations=, salt= optional)."),
    ],
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Set a user's SCRAM credentials (one per mechanism)."""
    upsertions = []
    for text in credentials:
        if "iterations=" not in text.replace(" ", "").lower():
            text = text.rstrip().removesuffix("]") + f",iterations={DEFAULT_ITERATIONS}]"
        try:
            setting = parse_scram_setting(text)
        except ScramSettingError as error:
            fail(str(error))
        if setting.name not in (None, name):
            fail(f"{text!r} names the user {setting.name}, not {name}")
        upsertions.append(
            ScramUpsertion(
                name, setting.mechanism, setting.iterations, setting.salt, setting.salted_password
            )
        )
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.alter_user_scram_credentials(upsertions)
        mechanisms = [u.mechanism for u in upsertions]
        emit(
            {"user": name, "set": mechanisms},
            output,
            f"Completed updating config for user {name} ({', '.join(mechanisms)}).",
        )

    run(body())


@user_app.command("delete")
def delete_credentials(
    name: Annotated[str, typer.Argument(help="The user.")],
    mechanisms: Annotated[list[str], typer.Argument(help="SCRAM-SHA-256 and/or SCRAM-SHA-512.")],
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Delete a user's SCRAM credentials for the given mechanisms."""
    names = [mechanism.strip().upper() for mechanism in mechanisms]
    for mechanism in names:
        if mechanism not in HASHES:
            fail(f"{mechanism} is not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.alter_user_scram_credentials([ScramDeletion(name, m) for m in names])
        emit(
            {"user": name, "deleted": names},
            output,
            f"Completed updating config for user {name} (deleted {', '.join(names)}).",
        )

    run(body())


@user_app.command("describe")
def describe(
    names: Annotated[list[str] | None, typer.Argument(help="Users (default: all).")] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """The SCRAM mechanisms and iterations of users (kafka-configs --describe)."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            described = await admin.describe_user_scram_credentials(names or None)
        data: list[dict[str, Any]] = [
            {"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in infos]}
            for user, infos in described.items()
        ]
        text = plain_table(
            ["USER", "SCRAM CREDENTIALS"],
            [
                (row["user"], ", ".join(
                    f"{c['mechanism']}=iterations={c['iterations']}" for c in row["credentials"]
                ))
                for row in data
            ],
        )  # fmt: skip
        emit(data, output, text)

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(user_app, name="user")
