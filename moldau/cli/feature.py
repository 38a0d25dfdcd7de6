"""`moldau feature describe | upgrade | downgrade`: the cluster's finalized features (KIP-584), as
`kafka-features.sh` has them.

`describe` prints Kafka's lines (`Feature: X  SupportedMinVersion: ..  FinalizedVersionLevel:
..  Epoch: ..`) from ApiVersions; `upgrade --feature X=N` and `downgrade --feature X=N` send one
UpdateFeatures for every `--feature` given (all or nothing), `--dry-run` only validates. Through
brokers (`-b`) or, with `--bootstrap-controller`, the controllers' listeners (KIP-919): the
quorum's leader takes it. `upgrade --feature kraft.version=1` turns a static quorum
(controller.quorum.voters) into one with dynamic voters (KIP-853).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from moldau.cli.common import (
    BootstrapControllerOption,
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
from moldau.client.config import ClientConfig
from moldau.client.quorum import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureMetadata,
    describe_controllers,
    update_features_on_controllers,
)

app = typer.Typer(help="Finalized features (kafka-features).", no_args_is_help=True)

FeatureOption = Annotated[
    list[str],
    typer.Option("--feature", help="feature=level (repeatable), e.g. kraft.version=1."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Validate only: change nothing.")]


@app.command("describe")
def describe(
    bootstrap: BootstrapOption = None,
    bootstrap_controller: BootstrapControllerOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Each feature's supported range and finalized level."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        if bootstrap_controller:
            features = (await describe_controllers(client, bootstrap_controller)).features
        else:
            async with AdminClient(client) as admin:
                features = await admin.describe_features()
        data = feature_rows(features)
        emit(data, output, "\n".join(_describe_line(row) for row in data))

    run(body())


def feature_rows(features: FeatureMetadata) -> list[dict[str, Any]]:
    names = sorted({*features.supported, *features.finalized})
    return [
        {
            "feature": name,
            "supported_min_version": features.supported.get(name, (0, 0))[0],
            "supported_max_version": features.supported.get(name, (0, 0))[1],
            "finalized_version_level": features.finalized.get(name, 0),
            "epoch": -1 if features.finalized_epoch is None else features.finalized_epoch,
        }
        for name in names
    ]


def _describe_line(row: dict[str, Any]) -> str:
    return (
        f"Feature: {row['feature']}\tSupportedMinVersion: {row['supported_min_version']}\t"
        f"SupportedMaxVersion: {row['supported_max_version']}\t"
        f"FinalizedVersionLevel: {row['finalized_version_level']}\tEpoch: {row['epoch']}"
    )


@app.command("upgrade")
def upgrade(
    feature: FeatureOption,
    bootstrap: BootstrapOption = None,
    bootstrap_controller: BootstrapControllerOption = None,
    dry_run: DryRunOption = False,
    settings: SettingsOption = None,
) -> None:
    """Raise features to the levels given (UpdateFeatures)."""
    _update(feature, UPGRADE, "upgraded", bootstrap, bootstrap_controller, dry_run, settings)


@app.command("downgrade")
def downgrade(
    feature: FeatureOption,
    unsafe: Annotated[
        bool, typer.Option("--unsafe", help="An unsafe downgrade (may lose metadata).")
    ] = False,
    bootstrap: BootstrapOption = None,
    bootstrap_controller: BootstrapControllerOption = None,
    dry_run: DryRunOption = False,
    settings: SettingsOption = None,
) -> None:
    """Lower features to the levels given (Moldau refuses every downgrade it cannot make)."""
    upgrade_type = UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE
    _update(feature, upgrade_type, "downgraded", bootstrap, bootstrap_controller, dry_run, settings)


def _update(
    items: list[str],
    upgrade_type: int,
    verb: str,
    bootstrap: str | None,
    bootstrap_controller: str | None,
    dry_run: bool,
    settings: list[str] | None,
) -> None:
    levels: dict[str, int] = {}
    for name, value in parse_key_values(
        items, what="feature", flag="--feature", example="kraft.version=1"
    ).items():
        if not value.lstrip("-").isdigit():
            fail(f"--feature {name}={value}: the level must be a number, e.g. {name}=1")
        levels[name] = int(value)
    client = client_config(bootstrap, settings)

    async def body() -> None:
        await _send(client, bootstrap_controller, levels, upgrade_type, dry_run)
        for name, level in levels.items():
            if dry_run:
                typer.echo(f"{name} can be {verb} to {level}.")
            else:
                typer.echo(f"{name} was {verb} to {level}.")

    run(body())


async def _send(
    client: ClientConfig,
    bootstrap_controller: str | None,
    levels: dict[str, int],
    upgrade_type: int,
    dry_run: bool,
) -> None:
    if bootstrap_controller:
        await update_features_on_controllers(
            client, bootstrap_controller, levels, upgrade_type=upgrade_type, validate_only=dry_run
        )
        return
    async with AdminClient(client) as admin:
        await admin.update_features(levels, upgrade_type=upgrade_type, validate_only=dry_run)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="feature")
