"""`moldau client-metrics list | describe | alter | delete`: client-metrics subscriptions (KIP-714),
as `kafka-client-metrics.sh` has them.

A subscription names the metrics (prefixes, `*` for all) that matching clients push and how often;
`--match selector=regex` narrows it to some clients (client_id, client_software_name, ...). `alter`
sets only what it is given (IncrementalAlterConfigs SET) and creates the subscription if needed;
`delete` removes every config, and so the subscription. `list` uses ListConfigResources,
`describe` DescribeConfigs. Clients push metrics only to a broker that advertises the telemetry
APIs, which Moldau, like Kafka without a telemetry plugin, does not: the subscriptions are kept
and answered, and pushed metrics are dropped (`moldau.broker.client_telemetry`).
"""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from moldau.cli.common import (
    BootstrapOption,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    emit,
    fail,
    run,
)
from moldau.client.admin import AdminClient, AlterConfigOp, ConfigResource, ResourceType

app = typer.Typer(help="Client-metrics subscriptions (kafka-client-metrics).", no_args_is_help=True)

_CONFIGS = ("metrics", "interval.ms", "match")
NameArgument = Annotated[str, typer.Argument(help="The subscription's name.", show_default=False)]


def _resource(name: str) -> ConfigResource:
    return ConfigResource(ResourceType.CLIENT_METRICS, name)


@app.command("list")
def list_command(
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """The names of the cluster's subscriptions."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            listed = await admin.list_config_resources([ResourceType.CLIENT_METRICS])
        names = [resource.name for resource in listed]
        emit(names, output, "\n".join(names))

    run(body())


@app.command("describe")
def describe(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Subscriptions to describe (default: all).", show_default=False),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Each subscription's configs."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            wanted = names or [
                r.name for r in await admin.list_config_resources([ResourceType.CLIENT_METRICS])
            ]
            described = {
                name: {
                    entry.name: entry.value
                    for entry in (await admin.describe_configs(_resource(name))).values()
                }
                for name in wanted
            }
        text = "\n".join(
            f"Client metrics configs for {name} are:"
            + "".join(f"\n  {key}={value}" for key, value in configs.items())
            for name, configs in described.items()
        )
        emit(described, output, text)

    run(body())


@app.command("alter")
def alter(
    name: Annotated[
        str | None,
        typer.Argument(help="The subscription's name (see --generate-name).", show_default=False),
    ] = None,
    generate_name: Annotated[
        bool, typer.Option("--generate-name", help="Name a new subscription with a random UUID.")
    ] = False,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="PREFIXES",
            help="Comma-separated metric name prefixes; * for every metric.",
        ),
    ] = None,
    interval: Annotated[
        int | None,
        typer.Option("--interval", metavar="MS", help="Push interval in ms (100 to 3600000)."),
    ] = None,
    match: Annotated[
        str | None,
        typer.Option(
            "--match",
            metavar="SELECTOR=REGEX,...",
            help="Clients to match, e.g. client_software_name=apache-kafka-java.",
        ),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Create a subscription or change the configs given."""
    if (name is None) == (not generate_name):
        fail("give a subscription name or --generate-name (one of the two)")
    subscription = name if name is not None else str(uuid.uuid4())
    given = {"metrics": metrics, "interval.ms": interval, "match": match}
    changes = [
        (key, AlterConfigOp.SET, str(value)) for key, value in given.items() if value is not None
    ]
    if not changes:
        fail("nothing to change: give --metrics, --interval or --match")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.incremental_alter_configs(_resource(subscription), changes)
        emit(
            {"name": subscription, "changes": {key: value for key, _, value in changes}},
            output,
            f"Altered client metrics config for {subscription}.",
        )

    run(body())


@app.command("delete")
def delete(
    name: NameArgument,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Remove a subscription."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.incremental_alter_configs(
                _resource(name), [(key, AlterConfigOp.DELETE, None) for key in _CONFIGS]
            )
        emit({"name": name}, output, f"Deleted client metrics config for {name}.")

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="client-metrics")
