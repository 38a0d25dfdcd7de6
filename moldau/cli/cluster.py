"""`moldau cluster info` (cluster id, brokers with the controller marked, topics) and
`moldau config describe | set | delete` for broker configs."""

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
    plain_table,
    run,
)
from moldau.cli.topic import source_name
from moldau.client.admin import AdminClient, AlterConfigOp, ConfigResource, ResourceType

cluster_app = typer.Typer(help="The cluster as a whole.", no_args_is_help=True)
config_app = typer.Typer(help="Broker configs (Kafka's names).", no_args_is_help=True)


@cluster_app.command("info")
def info(
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Cluster id, brokers (the controller marked with *) and topics."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            cluster = await admin.describe_cluster()
            metadata = await admin.list_topics()
        topics = sorted(metadata.topics.values(), key=lambda t: t.name)
        data: dict[str, Any] = {
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "brokers": [
                {
                    "node_id": b.node_id,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack,
                    "controller": b.node_id == cluster.controller_id,
                }
                for b in cluster.brokers.values()
            ],
            "topics": [
                {
                    "name": t.name,
                    "partitions": len(t.partitions),
                    "replication_factor": max(
                        (len(p.replicas) for p in t.partitions.values()), default=0
                    ),
                    "internal": t.is_internal,
                }
                for t in topics
            ],
        }
        brokers = plain_table(
            ["ID", "HOST", "PORT", "RACK"],
            [
                (
                    f"{b['node_id']}*" if b["controller"] else b["node_id"],
                    b["host"],
                    b["port"],
                    b["rack"],
                )
                for b in data["brokers"]
            ],
        )
        topic_table = plain_table(
            ["NAME", "PARTITIONS", "REPLICAS"],
            [(t["name"], t["partitions"], t["replication_factor"]) for t in data["topics"]],
        )
        text = (
            f"CLUSTER\n=======\n{cluster.cluster_id}\n\n"
            f"BROKERS (* controller)\n=======\n{brokers}\n\nTOPICS\n======\n{topic_table}"
        )
        emit(data, output, text)

    run(body())


BrokerOption = Annotated[
    int | None, typer.Option("--broker", help="Broker id (default: the first broker).")
]


async def _broker_id(admin: AdminClient, broker: int | None) -> int:
    if broker is not None:
        return broker
    cluster = await admin.describe_cluster()
    if not cluster.brokers:
        fail("the cluster reports no brokers")
    return next(iter(cluster.brokers))


@config_app.command("describe")
def describe(
    broker: BrokerOption = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """A broker's configs with their source (default, broker, ...)."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            node_id = await _broker_id(admin, broker)
            entries = await admin.describe_configs(
                ConfigResource(ResourceType.BROKER, str(node_id))
            )
        data: dict[str, Any] = {
            "broker": node_id,
            "configs": [
                {
                    "name": e.name,
                    "value": None if e.is_sensitive else e.value,
                    "source": source_name(e.source),
                    "read_only": e.is_read_only,
                    "sensitive": e.is_sensitive,
                }
                for e in entries.values()
            ],
        }
        text = f"Configs for broker {node_id} are:\n" + plain_table(
            ["CONFIG", "VALUE", "SOURCE"],
            [
                (c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"])
                for c in data["configs"]
            ],
        )
        emit(data, output, text)

    run(body())


def _alter(
    broker: int | None,
    operations: list[tuple[str, AlterConfigOp, str | None]],
    bootstrap: str | None,
    settings: list[str] | None,
    output: OutputFormat,
) -> None:
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            node_id = await _broker_id(admin, broker)
            await admin.incremental_alter_configs(
                ConfigResource(ResourceType.BROKER, str(node_id)), operations
            )
        emit(
            {"broker": node_id, "changes": [[n, op.name, v] for n, op, v in operations]},
            output,
            f"Completed updating config for broker {node_id}.",
        )

    run(body())


@config_app.command("set")
def set_configs(
    pairs: Annotated[list[str], typer.Argument(help="key=value pairs.", show_default=False)],
    broker: BrokerOption = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Set dynamic broker configs."""
    values = parse_key_values(pairs, what="broker config", flag="moldau config set")
    _alter(
        broker,
        [(k, AlterConfigOp.SET, v) for k, v in values.items()],
        bootstrap,
        settings,
        output,
    )


@config_app.command("delete")
def delete_configs(
    names: Annotated[list[str], typer.Argument(help="Config names.", show_default=False)],
    broker: BrokerOption = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Remove dynamic broker configs (back to the static or default value)."""
    _alter(broker, [(n, AlterConfigOp.DELETE, None) for n in names], bootstrap, settings, output)


def register(root: typer.Typer) -> None:
    root.add_typer(cluster_app, name="cluster")
    root.add_typer(config_app, name="config")
