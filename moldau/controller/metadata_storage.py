"""The metadata log's place on disk: where it lives, the checks made before it is opened, and
the space it keeps free for itself (`metadata_reserve`)."""

from __future__ import annotations

import os

from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig
from moldau.controller import metadata_reserve
from moldau.raft.file_log import FileReplicatedLog
from moldau.raft.file_snapshots import FileSnapshotStore, snapshot_file_name
from moldau.raft.meta_properties import (
    BOOTSTRAP_SNAPSHOT_ID,
    METADATA_LOG_DIRECTORY_NAME,
    StorageFormatError,
    ensure_formatted,
    read_meta_properties,
)

# Space the metadata log keeps free for itself: an operation that would leave less is refused.
METADATA_RESERVE_BYTES = 1024 * 1024


def metadata_log_directory(config: BrokerConfig) -> str:
    """`<metadata.log.dir, or the first of log.dirs>/__cluster_metadata-0`."""
    base = config.get("metadata.log.dir") or config.log_dirs[0]
    return os.path.join(str(base), METADATA_LOG_DIRECTORY_NAME)


def open_metadata_storage(
    config: BrokerConfig, layout: ClusterLayout, directory: str
) -> tuple[str, str | None, FileReplicatedLog, FileSnapshotStore]:
    """Check and open the metadata log in `directory` (blocking: run in a worker thread): the
    cluster id, this node's directory id, the log and its snapshots. StorageFormatError for a
    node of a cluster on storage never formatted, or formatted for another kind of quorum."""
    metadata_dir = os.path.dirname(directory)
    directories = [*config.log_dirs, metadata_dir]
    if not layout.standalone:
        for path in directories:
            if read_meta_properties(path) is None:
                raise StorageFormatError(
                    f"{path} is not formatted; a node of a cluster starts on storage "
                    "formatted with the cluster's id: moldau storage format -t "
                    "CLUSTER_ID with this node's settings"
                )
    if not layout.dynamic and os.path.exists(
        os.path.join(directory, snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID))
    ):
        raise StorageFormatError(
            f"{directory} was formatted for dynamic voters (--standalone or "
            "--initial-controllers); set controller.quorum.bootstrap.servers instead "
            "of controller.quorum.voters"
        )
    cluster_id = ensure_formatted(
        directories, node_id=config.node_id, cluster_id=config.get("cluster.id")
    )
    properties = read_meta_properties(metadata_dir)
    os.makedirs(directory, exist_ok=True)
    metadata_reserve.release_if_full(directory, needed=METADATA_RESERVE_BYTES)
    return (
        cluster_id,
        (properties.directory_id or None) if properties else None,
        FileReplicatedLog(directory),
        FileSnapshotStore(directory),
    )
