"""`moldau cluster add-controller | remove-controller`: change the metadata quorum's voters
(KIP-853), as `kafka-metadata-quorum --bootstrap-controller ... add-controller |
remove-controller` does.

`add-controller` reads the controller to add from its own configuration (`-c`/`--override`:
node.id, its controller listeners, and the directory id in its metadata log directory's
meta.properties), so it runs where that controller's files are; the controller must be running
and have caught up with the log as an observer. `remove-controller` names the voter by id and
directory id. Both go to the quorum's leader through `--bootstrap-controller`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from moldau.cli.common import SettingsOption, client_config, fail, run
from moldau.cli.storage import StorageFormatError, metadata_directory_id
from moldau.client.quorum import ControllerListener, add_controller, remove_controller
from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig, ConfigError

BootstrapControllerRequired = Annotated[
    str,
    typer.Option(
        "--bootstrap-controller",
        help="host:port[,host:port] of the quorum's controller listeners.",
        show_default=False,
    ),
]


def add_controller_command(
    bootstrap_controller: BootstrapControllerRequired,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "-c", "--config", help="The added controller's server.properties.", exists=True
        ),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", help="Set a property of it: key=value (repeatable)."),
    ] = None,
    timeout_ms: Annotated[int, typer.Option("--timeout-ms", help="Wait for the commit.")] = 30000,
    settings: SettingsOption = None,
) -> None:
    """Make a controller that follows the metadata log a voter (AddRaftVoter)."""
    try:
        config = BrokerConfig.load(
            properties_file=str(config_file) if config_file else None, overrides=override or []
        )
        layout = ClusterLayout.from_config(config)
        directory_id = metadata_directory_id(config)
    except (ConfigError, StorageFormatError, OSError) as exc:
        fail(str(exc))
    if not layout.is_controller or not layout.controller_listeners:
        fail(f"node {config.node_id} is not a controller with a controller listener")
    listeners = [
        ControllerListener(name=x.name, host=x.host, port=x.port)
        for x in layout.controller_listeners
    ]
    client = client_config(None, settings)

    async def body() -> None:
        await add_controller(
            client,
            bootstrap_controller,
            voter_id=config.node_id,
            directory_id=directory_id,
            listeners=listeners,
            timeout_ms=timeout_ms,
        )
        typer.echo(f"Added controller {config.node_id} with directory id {directory_id}")

    run(body())


def remove_controller_command(
    bootstrap_controller: BootstrapControllerRequired,
    controller_id: Annotated[int, typer.Option("--controller-id", help="The voter's node id.")],
    controller_directory_id: Annotated[
        str,
        typer.Option("--controller-directory-id", help="Its metadata log's directory id."),
    ],
    settings: SettingsOption = None,
) -> None:
    """Remove a voter from the metadata quorum (RemoveRaftVoter)."""
    client = client_config(None, settings)

    async def body() -> None:
        await remove_controller(
            client,
            bootstrap_controller,
            voter_id=controller_id,
            directory_id=controller_directory_id,
        )
        typer.echo(f"Removed controller {controller_id}")

    run(body())
