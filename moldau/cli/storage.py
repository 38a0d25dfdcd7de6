"""`moldau storage format | info | random-uuid`, as Kafka's `kafka-storage.sh`.

`format` writes `meta.properties` (cluster.id, node.id, directory.id) into every log directory
and the metadata log directory; `moldau server` also formats on first start, so this is for
choosing the cluster id up front or for preparing several nodes of one cluster. `info` shows
what each directory holds. These work on local directories, not through the protocol.

A controller of a quorum with dynamic voters (`controller.quorum.bootstrap.servers`, KIP-853) is
formatted with one of `--standalone` (a quorum of this controller alone), `--initial-controllers
id@host:port:directoryid,...` (the first voters; this node takes its directory id from there)
or `--no-initial-controllers` (it joins later, added with `moldau cluster add-controller`); the
first two write the bootstrap checkpoint with the voters, as kafka-storage does.

`--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'` (repeatable, kafka-storage's
syntax) writes SCRAM users into the bootstrap metadata (`bootstrap.checkpoint` in the metadata
log directory): the cluster's first active controller puts them into the metadata log, so that
brokers can authenticate to each other with SCRAM from their first start. `--feature
transaction.version=1` (repeatable, kafka-storage's) finalizes a feature at another level than a
new cluster's default, also through the bootstrap metadata (`metadata.version` and
`kraft.version` are not chosen this way: Moldau writes one metadata.version, and the voter
options choose kraft.version).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from moldau.cli.common import ExitCode, FormatOption, OutputFormat, emit, fail
from moldau.cli.scram_settings import ScramSettingError, parse_scram_setting
from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig, ConfigError
from moldau.metadata.records import UserScramCredentialRecord
from moldau.protocol.sasl.scram import credential_from_salted_password
from moldau.raft.meta_properties import (
    METADATA_LOG_DIRECTORY_NAME,
    InitialController,
    ensure_formatted,
    random_uuid_string,
    read_meta_properties,
    write_bootstrap_checkpoint,
)
from moldau.raft.meta_properties import (
    StorageFormatError as StorageFormatError,  # (re-exported: the CLI's other commands use it)
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


def _metadata_directory(config: BrokerConfig) -> str:
    return os.path.abspath(str(config.get("metadata.log.dir") or config.log_dirs[0]))


def metadata_directory_id(config: BrokerConfig) -> str:
    """The directory id of this node's metadata log directory (its id as a voter, KIP-853);
    raises StorageFormatError when it is not formatted."""
    directory = _metadata_directory(config)
    properties = read_meta_properties(directory)
    if properties is None or not properties.directory_id:
        raise StorageFormatError(
            f"{directory} is not formatted (moldau storage format --no-initial-controllers)"
        )
    return properties.directory_id


def format_directories(
    config: BrokerConfig,
    cluster_id: str | None,
    *,
    initial_controllers: list[InitialController] | None = None,
    listener_name: str = "CONTROLLER",
) -> tuple[str, list[str]]:
    """Write meta.properties into every directory of `config` (those already formatted for
    this node and cluster are left alone), and with `initial_controllers` the bootstrap
    checkpoint of dynamic voters; returns the cluster id and the directories.

    Raises `StorageFormatError` for a directory of another cluster or node, or one whose
    directory id is not this node's in `initial_controllers`."""
    directories = _directories(config)
    for directory in directories:
        os.makedirs(directory, exist_ok=True)
    metadata_directory = _metadata_directory(config)
    directory_ids: dict[str, str] = {}
    own = [c for c in initial_controllers or () if c.node_id == config.node_id]
    if own:
        existing = read_meta_properties(metadata_directory)
        if existing is not None and existing.directory_id != own[0].directory_id:
            raise StorageFormatError(
                f"{metadata_directory} has directory.id={existing.directory_id}, but "
                f"--initial-controllers gives node {config.node_id} {own[0].directory_id}"
            )
        directory_ids[metadata_directory] = own[0].directory_id
    resolved = ensure_formatted(
        directories,
        node_id=config.node_id,
        cluster_id=cluster_id or config.get("cluster.id"),
        directory_ids=directory_ids,
    )
    if initial_controllers:
        write_bootstrap_checkpoint(
            os.path.join(metadata_directory, METADATA_LOG_DIRECTORY_NAME),
            initial_controllers,
            listener_name,
        )
    return resolved, directories


def initial_controllers_of(
    config: BrokerConfig,
    *,
    standalone: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
) -> list[InitialController] | None:
    """The voters to write into the bootstrap checkpoint (None: none), from the flags; raises
    ConfigError or StorageFormatError with one line saying what to change."""
    chosen = [
        flag
        for flag, given in (
            ("--standalone", standalone),
            ("--initial-controllers", initial_controllers is not None),
            ("--no-initial-controllers", no_initial_controllers),
        )
        if given
    ]
    if len(chosen) > 1:
        raise ConfigError(f"use only one of {', '.join(chosen)}")
    layout = ClusterLayout.from_config(config)
    if chosen and not layout.is_controller:
        raise ConfigError(f"{chosen[0]} is for controllers; process.roles has no controller")
    if chosen and layout.voters:
        raise ConfigError(
            f"{chosen[0]} formats a controller for dynamic voters, but controller.quorum.voters "
            "is set; remove it and set controller.quorum.bootstrap.servers instead"
        )
    if layout.is_controller and layout.dynamic and not chosen:
        raise ConfigError(
            "a controller with controller.quorum.bootstrap.servers needs one of --standalone, "
            "--initial-controllers or --no-initial-controllers"
        )
    if standalone:
        listener = layout.controller_listeners[0]
        existing = read_meta_properties(_metadata_directory(config))
        return [
            InitialController(
                node_id=config.node_id,
                host=listener.host,
                port=listener.port,
                directory_id=existing.directory_id if existing else random_uuid_string(),
            )
        ]
    if initial_controllers is not None:
        controllers = [
            InitialController.parse(item) for item in initial_controllers.split(",") if item
        ]
        ids = [c.node_id for c in controllers]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"--initial-controllers names a node twice: {ids}")
        if config.node_id not in ids:
            raise ConfigError(
                f"--initial-controllers does not name this node (node.id={config.node_id})"
            )
        return controllers
    return None


@storage_app.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id."""
    typer.echo(new_cluster_id())


def _feature_record(text: str) -> Any:
    """`--feature NAME=LEVEL` as the FeatureLevelRecord a new cluster starts with."""
    from moldau.controller.feature_control import (
        KRAFT_VERSION,
        METADATA_VERSION,
        SUPPORTED_FEATURES,
    )
    from moldau.metadata.records import FeatureLevelRecord

    name, equals, level_text = text.partition("=")
    name = name.strip()
    if not equals or not level_text.strip().isdigit():
        fail(f"--feature wants NAME=LEVEL (e.g. transaction.version=1), not {text!r}")
    level = int(level_text)
    if name in (METADATA_VERSION, KRAFT_VERSION):
        fail(
            f"--feature {name} cannot be chosen: Moldau writes metadata.version 25, and "
            "--standalone or --initial-controllers choose kraft.version 1"
        )
    supported = SUPPORTED_FEATURES.get(name)
    if supported is None:
        known = ", ".join(
            n for n in SUPPORTED_FEATURES if n not in (METADATA_VERSION, KRAFT_VERSION)
        )
        fail(f"--feature {name}: unknown feature (Moldau's are {known})")
    if not supported[0] <= level <= supported[1]:
        fail(f"--feature {name}={level}: Moldau supports levels {supported[0]}-{supported[1]}")
    return FeatureLevelRecord(name=name, feature_level=level)


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
    standalone: Annotated[
        bool,
        typer.Option("-s", "--standalone", help="Dynamic voters: a quorum of this controller."),
    ] = False,
    initial_controllers: Annotated[
        str | None,
        typer.Option(
            "-I",
            "--initial-controllers",
            help="Dynamic voters: the first ones, id@host:port:directoryid,...",
        ),
    ] = None,
    no_initial_controllers: Annotated[
        bool,
        typer.Option(
            "-N", "--no-initial-controllers", help="Dynamic voters: join later as an observer."
        ),
    ] = False,
    add_scram: Annotated[
        list[str] | None,
        typer.Option(
            "-S",
            "--add-scram",
            help="A SCRAM user for the new cluster: "
            "'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable).",
        ),
    ] = None,
    feature: Annotated[
        list[str] | None,
        typer.Option(
            "-f",
            "--feature",
            metavar="NAME=LEVEL",
            help="A feature level for the new cluster, e.g. transaction.version=1 (repeatable).",
        ),
    ] = None,
) -> None:
    """Write meta.properties into every log directory of this node's configuration."""
    config = _load(config_file, override)
    try:
        scram_records = [_scram_record(text) for text in add_scram or ()]
    except ScramSettingError as exc:
        fail(f"--add-scram {exc}")
    feature_records = [_feature_record(text) for text in feature or ()]
    try:
        controllers = initial_controllers_of(
            config,
            standalone=standalone,
            initial_controllers=initial_controllers,
            no_initial_controllers=no_initial_controllers,
        )
    except (ConfigError, StorageFormatError) as exc:
        fail(str(exc))
    directories = _directories(config)
    formatted = [d for d in directories if _read(d) is not None]
    if formatted and not ignore_formatted:
        fail(
            f"log directory {formatted[0]} is already formatted; "
            "use --ignore-formatted to skip formatted directories",
            ExitCode.KAFKA_ERROR,
        )
    listener_names = ClusterLayout.from_config(config).controller_listener_names
    try:
        resolved, directories = format_directories(
            config,
            cluster_id,
            initial_controllers=controllers,
            listener_name=listener_names[0] if listener_names else "CONTROLLER",
        )
    except (StorageFormatError, OSError) as exc:
        fail(str(exc), ExitCode.KAFKA_ERROR)
    for directory in directories:
        typer.echo(
            f"Formatting {directory} with cluster.id {resolved} and node.id {config.node_id}"
        )
    if scram_records or feature_records:
        try:
            # (imported here: the controller package is heavy for the commands that only read)
            from moldau.controller.bootstrap_metadata import write_bootstrap_metadata

            path = write_bootstrap_metadata(
                _metadata_directory(config), [*feature_records, *scram_records]
            )
        except OSError as exc:
            fail(f"cannot write the bootstrap metadata: {exc}", ExitCode.KAFKA_ERROR)
        if scram_records:
            users = ", ".join(f"{r.name} ({r.mechanism})" for r in scram_records)
            typer.echo(f"Bootstrap SCRAM credentials in {path}: {users}")
        if feature_records:
            levels = ", ".join(f"{r.name}={r.feature_level}" for r in feature_records)
            typer.echo(f"Bootstrap feature levels in {path}: {levels}")
    if controllers:
        typer.echo(
            "Bootstrap voters (kraft.version 1): "
            + ", ".join(f"{c.node_id}@{c.host}:{c.port}:{c.directory_id}" for c in controllers)
        )


def _scram_record(text: str) -> UserScramCredentialRecord:
    setting = parse_scram_setting(text)
    if setting.name is None:
        raise ScramSettingError(f"{text!r}: name=<user> is missing")
    credential = credential_from_salted_password(
        setting.mechanism, setting.salted_password, setting.salt, setting.iterations
    )
    return UserScramCredentialRecord.of(setting.name, setting.mechanism, credential)


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
