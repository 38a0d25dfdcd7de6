"""`moldau cluster info` (cluster id, brokers fenced or not, the metadata quorum with each
replica's lag, features, topics) and `moldau config describe | set | delete` for broker configs.

Brokers come from DescribeCluster v2 with fenced brokers (Metadata lists only unfenced ones), the
quorum from DescribeQuorum (as `kafka-metadata-quorum describe --status --replication` shows
it), features from ApiVersions (as `kafka-features describe`). With `--bootstrap-controller`
only controller listeners are asked (KIP-919). `add-controller`/`remove-controller` change the
quorum's voters (`controllers.py`); `reassign` moves partitions between brokers
(`reassign.py`); `log-dirs describe` lists the brokers' log dirs (`log_dirs.py`)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from moldau.cli import cluster_up, controllers, local_nodes, log_dirs, reassign
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
    plain_table,
    run,
)
from moldau.cli.topic import source_name
from moldau.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from moldau.client.quorum import FeatureMetadata, QuorumInfo, describe_controllers
from moldau.config.keys import NOT_APPLICABLE_PREFIX

cluster_app = typer.Typer(help="The cluster as a whole.", no_args_is_help=True)
cluster_app.command("up")(cluster_up.up)
cluster_app.command("add-controller")(controllers.add_controller_command)
cluster_app.command("remove-controller")(controllers.remove_controller_command)
cluster_app.add_typer(reassign.app, name="reassign")
cluster_app.add_typer(log_dirs.app, name="log-dirs")
cluster_app.add_typer(local_nodes.node_app, name="node")
config_app = typer.Typer(help="Broker configs (Kafka's names).", no_args_is_help=True)


@cluster_app.command("info")
def info(
    bootstrap: BootstrapOption = None,
    bootstrap_controller: BootstrapControllerOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Cluster id, brokers (fenced or not), the metadata quorum, features and topics."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        if bootstrap_controller:
            controllers = await describe_controllers(client, bootstrap_controller)
            data: dict[str, Any] = {"cluster_id": controllers.cluster_id}
            endpoints = {i: c.address for i, c in controllers.controllers.items()}
            data.update(_quorum_data(controllers.quorum, endpoints, controllers.features))
            emit(data, output, _info_text(data))
            return
        async with AdminClient(client) as admin:
            cluster = await admin.describe_cluster(include_fenced_brokers=True)
            quorum = await admin.describe_quorum()
            features = await admin.describe_features()
            metadata = await admin.list_topics()
        data = {
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "brokers": [
                {
                    "node_id": b.node_id,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack,
                    "fenced": b.fenced,
                    "controller": b.node_id == quorum.leader_id,
                }
                for b in cluster.brokers.values()
            ],
            **_quorum_data(quorum, dict(quorum.endpoints), features),
            "topics": [
                {
                    "name": t.name,
                    "partitions": len(t.partitions),
                    "replication_factor": max(
                        (len(p.replicas) for p in t.partitions.values()), default=0
                    ),
                    "internal": t.is_internal,
                }
                for t in sorted(metadata.topics.values(), key=lambda t: t.name)
            ],
        }
        emit(data, output, _info_text(data))

    run(body())


def _quorum_data(
    quorum: QuorumInfo, endpoints: dict[int, str], features: FeatureMetadata
) -> dict[str, Any]:
    """The quorum as `kafka-metadata-quorum describe --status/--replication` shows it, and the
    features as `kafka-features describe` does."""

    def replica(state: Any, role: str) -> dict[str, Any]:
        return {
            "node_id": state.replica_id,
            "directory_id": state.directory_id,
            "endpoint": endpoints.get(state.replica_id),
            "status": role,
            "log_end_offset": state.log_end_offset,
            "lag": state.lag,
            "last_fetch_timestamp": state.last_fetch_timestamp,
            "last_caught_up_timestamp": state.last_caught_up_timestamp,
        }

    return {
        "quorum": {
            "leader_id": quorum.leader_id,
            "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "max_follower_lag": quorum.max_follower_lag,
        },
        "controllers": [
            replica(v, "Leader" if v.replica_id == quorum.leader_id else "Follower")
            for v in sorted(quorum.voters, key=lambda v: v.replica_id)
        ],
        "observers": [
            replica(o, "Observer") for o in sorted(quorum.observers, key=lambda o: o.replica_id)
        ],
        "features": [
            {
                "name": name,
                "finalized": features.finalized.get(name, 0),
                "supported": list(features.supported[name]) if name in features.supported else None,
            }
            for name in sorted(set(features.supported) | set(features.finalized))
        ],
        "finalized_features_epoch": features.finalized_epoch,
    }


def _ago(timestamp_ms: int, now_ms: int) -> str:
    return "-" if timestamp_ms < 0 else f"{max(0, now_ms - timestamp_ms)} ms ago"


def _info_text(data: dict[str, Any]) -> str:
    now_ms = int(time.time() * 1000)
    sections = [f"CLUSTER\n=======\n{data['cluster_id']}"]
    if "brokers" in data:
        brokers = plain_table(
            ["ID", "HOST", "PORT", "RACK", "STATUS"],
            [
                (
                    f"{b['node_id']}*" if b["controller"] else b["node_id"],
                    b["host"],
                    b["port"],
                    b["rack"],
                    "fenced" if b["fenced"] else "unfenced",
                )
                for b in data["brokers"]
            ],
        )
        sections.append(f"BROKERS (* the active controller)\n=======\n{brokers}")
    quorum = data["quorum"]
    replicas = plain_table(
        [
            "NODE-ID",
            "DIRECTORY-ID",
            "ENDPOINT",
            "STATUS",
            "LOG-END-OFFSET",
            "LAG",
            "LAST-FETCH",
            "LAST-CAUGHT-UP",
        ],
        [
            (
                r["node_id"],
                r["directory_id"] or "-",
                r["endpoint"],
                r["status"],
                r["log_end_offset"],
                r["lag"],
                _ago(r["last_fetch_timestamp"], now_ms),
                _ago(r["last_caught_up_timestamp"], now_ms),
            )
            for r in data["controllers"] + data["observers"]
        ],
    )
    sections.append(
        "METADATA QUORUM\n===============\n"
        f"leader {quorum['leader_id']}, epoch {quorum['leader_epoch']}, high watermark "
        f"{quorum['high_watermark']}, max follower lag {quorum['max_follower_lag']}\n{replicas}"
    )
    features = plain_table(
        ["FEATURE", "FINALIZED", "SUPPORTED"],
        [
            (
                f["name"],
                f["finalized"],
                "-" if f["supported"] is None else "{}-{}".format(*f["supported"]),
            )
            for f in data["features"]
        ],
    )
    sections.append(f"FEATURES\n========\n{features}")
    if "topics" in data:
        topics = plain_table(
            ["NAME", "PARTITIONS", "REPLICAS"],
            [(t["name"], t["partitions"], t["replication_factor"]) for t in data["topics"]],
        )
        sections.append(f"TOPICS\n======\n{topics}")
    return "\n\n".join(sections)


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


def _no_effect(entry: ConfigEntry) -> str | None:
    """Why a config of Kafka's has no effect on a Moldau broker (None: it does, or the broker
    is not Moldau's and said nothing)."""
    documentation = entry.documentation or ""
    if entry.is_read_only and documentation.startswith(NOT_APPLICABLE_PREFIX):
        return documentation.removeprefix(NOT_APPLICABLE_PREFIX)
    return None


@config_app.command("describe")
def describe(
    broker: BrokerOption = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Also Kafka's configs that have no effect in Moldau (read-only), with why.",
        ),
    ] = False,
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
                ConfigResource(ResourceType.BROKER, str(node_id)), include_documentation=True
            )
        configs = []
        for e in entries.values():
            no_effect = _no_effect(e)
            if no_effect is not None and not show_all:
                continue
            config: dict[str, Any] = {
                "name": e.name,
                "value": None if e.is_sensitive else e.value,
                "source": source_name(e.source),
                "read_only": e.is_read_only,
                "sensitive": e.is_sensitive,
            }
            if no_effect is not None:
                config["no_effect"] = no_effect
            configs.append(config)
        data: dict[str, Any] = {"broker": node_id, "configs": configs}

        def row(c: dict[str, Any]) -> tuple[str, str | None, str]:
            return c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"]

        text = f"Configs for broker {node_id} are:\n" + plain_table(
            ["CONFIG", "VALUE", "SOURCE"], [row(c) for c in configs if "no_effect" not in c]
        )
        inert = [c for c in configs if "no_effect" in c]
        if inert:
            text += "\n\nKafka's configs with no effect in Moldau (read-only):\n" + "\n".join(
                f"{name}={value} ({source}): {c['no_effect']}"
                for c in inert
                for name, value, source in [row(c)]
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
    values = parse_key_values(
        pairs, what="broker config", flag="moldau config set", example="log.retention.ms=60000"
    )
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
