"""`moldau storage format | info | random-uuid`, as Kafka's `kafka-storage.sh`.

`format` writes `meta.properties` (cluster.id, node.id, directory.id) into every log directory
and the metadata log directory; `moldau server` also formats on first start, so this is for
choosing the cluster id up front or for preparing several nodes of one cluster. `info` shows
what each directory holds. These work on local directories, not through the protocol.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from moldau.cli.common import ExitCode, FormatOption, OutputFormat, emit, fail
from moldau.config.values import BrokerConfig, ConfigError
from moldau.raft.meta_properties import (
    StorageFormatError,
    ensure_formatted,
    random_uuid_string,
    read_meta_properties,
)

storage_app = typer.Typer(help="Local storage directories (meta.properties).", no_args_is_help=True)

ConfigFileOption = Annotated[
    Path | None, typer.Option("-c", "--config", help="A server.properties file.", exists=True)
]
OverrideOption = Annotated[
    list[str] | None, typer.Option("--override", help="Set a property: key=value (repeatable).")
]


def _load(config_file: Path | None, override: list[str] | None) -> BrokerConfig:
    try:
        return BrokerConfig.load(
            properties_file=str(config_file) if config_file else None, overrides=override or []
        )
    except (ConfigError, OSError) as exc:
        fail(str(exc))


def _directories(config: BrokerConfig) -> list[str]:
    directories = [os.path.abspath(d) for d in config.log_dirs]
    metadata_dir = config.get("metadata.log.dir")
    if metadata_dir:
        directories.append(os.path.abspath(str(metadata_dir)))
    return list(dict.fromkeys(directories))


def new_cluster_id() -> str:
    """A new cluster id, as `kafka-storage random-uuid` makes them."""
    return random_uuid_string()


def format_directories(config: BrokerConfig, cluster_id: str | None) -> tuple[str, list[str]]:
    """Write meta.properties into every directory of `config` (those already formatted for
    this node and cluster are left alone); returns the cluster id and the directories.

    Raises `StorageFormatError` for a directory of another cluster or node."""
    directories = _directories(config)
    for directory in directories:
        os.makedirs(directory, exist_ok=True)
    resolved = ensure_formatted(
        directories, node_id=config.node_id, cluster_id=cluster_id or config.get("cluster.id")
    )
    return resolved, directories


@storage_app.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id."""
    typer.echo(new_cluster_id())


@storage_app.command("format")
def format_command(
    cluster_id: Annotated[
        str | None, typer.Option("-t", "--cluster-id", help="Cluster id (default: a new one).")
    ] = None,
    config_file: ConfigFileOption = None,
    override: OverrideOption = None,
    ignore_formatted: Annotated[
        bool, typer.Option("-g", "--ignore-formatted", help="Skip directories already formatted.")
    ] = False,
) -> None:
    """Write meta.properties into every log directory of this node's configuration."""
    config = _load(config_file, override)
    directories = _directories(config)
    formatted = [d for d in directories if _read(d) is not None]
    if formatted and not ignore_formatted:
        fail(
            f"log directory {formatted[0]} is already formatted; "
            "use --ignore-formatted to skip formatted directories",
            ExitCode.KAFKA_ERROR,
        )
    try:
        resolved, directories = format_directories(config, cluster_id)
    except (StorageFormatError, OSError) as exc:
        fail(str(exc), ExitCode.KAFKA_ERROR)
    for directory in directories:
        typer.echo(
            f"Formatting {directory} with cluster.id {resolved} and node.id {config.node_id}"
        )


@storage_app.command("info")
def info(
    config_file: ConfigFileOption = None,
    override: OverrideOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show the meta.properties of each log directory."""
    config = _load(config_file, override)
    rows: list[dict[str, Any]] = []
    for directory in _directories(config):
        properties = _read(directory)
        rows.append(
            {
                "directory": directory,
                "formatted": properties is not None,
                "cluster_id": properties.cluster_id if properties else None,
                "node_id": properties.node_id if properties else None,
                "directory_id": properties.directory_id if properties else None,
            }
        )
    lines = []
    for row in rows:
        if row["formatted"]:
            lines.append(
                f"{row['directory']}: cluster.id={row['cluster_id']} node.id={row['node_id']} "
                f"directory.id={row['directory_id']}"
            )
        else:
            lines.append(f"{row['directory']}: not formatted")
    emit(rows, output, "\n".join(lines))
    if not all(row["formatted"] for row in rows):
        raise typer.Exit(int(ExitCode.KAFKA_ERROR))


def _read(directory: str) -> Any:
    try:
        return read_meta_properties(directory)
    except StorageFormatError as exc:
        fail(str(exc), ExitCode.KAFKA_ERROR)


def register(root: typer.Typer) -> None:
    root.add_typer(storage_app, name="storage")
