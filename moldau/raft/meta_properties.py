"""`meta.properties` in every log directory, as written by `kafka-storage format` (KIP-631, KIP-858).

    version=1
    cluster.id=<22-character base64url Uuid>
    node.id=<int>
    directory.id=<base64url Uuid, one per directory>

`ensure_formatted` writes it to directories that lack it (a first start formats itself) and
refuses to start when a directory belongs to another cluster or node: mixing them up would
serve one cluster's data as another's.

A controller formatted for dynamic voters (KIP-853: `--standalone`, `--initial-controllers`)
also gets the bootstrap checkpoint, `__cluster_metadata-0/00000000000000000000-0000000000
.checkpoint`, naming the initial voters with their directory ids and endpoints
(`write_bootstrap_checkpoint`).
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from moldau.raft._files import write_file_atomically
from moldau.raft.control_records import bootstrap_checkpoint
from moldau.raft.file_snapshots import FileSnapshotStore
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.voter_set import Endpoint, VoterNode, VoterSet

META_PROPERTIES_FILE_NAME = "meta.properties"


class StorageFormatError(ValueError):
    """A log directory that this node must not use; the message says which and how to fix it
    (a ValueError: `moldau server` reports it in one line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = 1

    def to_text(self) -> str:
        return (
            f"version={self.version}\n"
            f"cluster.id={self.cluster_id}\n"
            f"node.id={self.node_id}\n"
            f"directory.id={self.directory_id}\n"
        )

    @classmethod
    def from_text(cls, text: str, *, path: str = META_PROPERTIES_FILE_NAME) -> MetaProperties:
        values: dict[str, str] = {}
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped or stripped[0] in "#!" or "=" not in stripped:
                continue
            key, value = stripped.split("=", 1)
            values[key.strip()] = value.strip()
        try:
            return cls(
                version=int(values.get("version", "1")),
                cluster_id=values["cluster.id"],
                node_id=int(values["node.id"]),
                directory_id=values.get("directory.id", ""),
            )
        except (KeyError, ValueError) as exc:
            raise StorageFormatError(f"{path} is missing or has a bad {exc}") from None


def random_uuid_string() -> str:
    """A Kafka-style Uuid string: 22 characters of unpadded base64url."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):  # Kafka avoids ids that look like command-line flags
            return text


def read_meta_properties(directory: str) -> MetaProperties | None:
    path = os.path.join(directory, META_PROPERTIES_FILE_NAME)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return MetaProperties.from_text(handle.read(), path=path)


def write_meta_properties(directory: str, properties: MetaProperties) -> None:
    write_file_atomically(os.path.join(directory, META_PROPERTIES_FILE_NAME), properties.to_text())


def ensure_formatted(
    directories: Sequence[str],
    *,
    node_id: int,
    cluster_id: str | None = None,
    directory_ids: Mapping[str, str] | None = None,
) -> str:
    """Check or write meta.properties in each directory; return the cluster id.

    `cluster_id` is the configured one (`cluster.id`), if any. Directories already formatted
    must agree with it, with `node_id` and with each other; unformatted ones are formatted with
    the cluster id found (or a new random one), and the directory id `directory_ids` gives
    them (by absolute path) or a new random one.
    """
    unique = list(dict.fromkeys(os.path.abspath(d) for d in directories))
    found: dict[str, MetaProperties] = {}
    for directory in unique:
        properties = read_meta_properties(directory)
        if properties is not None:
            found[directory] = properties
    for directory, properties in found.items():
        where = os.path.join(directory, META_PROPERTIES_FILE_NAME)
        if properties.node_id != node_id:
            raise StorageFormatError(
                f"{where} has node.id={properties.node_id} but this node is node.id={node_id}; "
                "use the node.id the directory was formatted with, or another log.dirs"
            )
        if cluster_id is not None and properties.cluster_id != cluster_id:
            raise StorageFormatError(
                f"{where} belongs to cluster {properties.cluster_id}, not the configured "
                f"cluster.id={cluster_id}"
            )
    cluster_ids = {p.cluster_id for p in found.values()}
    if len(cluster_ids) > 1:
        raise StorageFormatError(
            "log directories belong to different clusters: "
            + ", ".join(f"{d}: {p.cluster_id}" for d, p in sorted(found.items()))
        )
    resolved = cluster_id or (next(iter(cluster_ids)) if cluster_ids else random_uuid_string())
    for directory in unique:
        if directory not in found:
            write_meta_properties(
                directory,
                MetaProperties(
                    cluster_id=resolved,
                    node_id=node_id,
                    directory_id=(directory_ids or {}).get(directory) or random_uuid_string(),
                ),
            )
    return resolved


METADATA_LOG_DIRECTORY_NAME = "__cluster_metadata-0"
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(epoch=0, offset=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class InitialController:
    """One entry of `--initial-controllers`: id@host:port:directoryid (KIP-853)."""

    node_id: int
    host: str
    port: int
    directory_id: str

    @classmethod
    def parse(cls, text: str) -> InitialController:
        node_part, at, rest = text.strip().partition("@")
        address, _, directory_id = rest.rpartition(":")
        host, _, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if (
            not at
            or not node_part.isdigit()
            or not host
            or not port.isdigit()
            or len(directory_id) != 22
        ):
            raise StorageFormatError(
                f"--initial-controllers entry {text!r} must look like id@host:port:directoryid "
                "with a 22-character directory id (moldau storage random-uuid)"
            )
        return cls(node_id=int(node_part), host=host, port=int(port), directory_id=directory_id)


def write_bootstrap_checkpoint(
    metadata_log_directory: str, controllers: Sequence[InitialController], listener_name: str
) -> None:
    """Write the bootstrap checkpoint naming the initial voters (kraft.version 1)."""
    voters = VoterSet.of_nodes(
        VoterNode(
            node_id=c.node_id,
            directory_id=c.directory_id,
            endpoints=(Endpoint(name=listener_name, host=c.host, port=c.port),),
        )
        for c in controllers
    )
    os.makedirs(metadata_log_directory, exist_ok=True)
    store = FileSnapshotStore(metadata_log_directory)
    try:
        if store.latest_snapshot_id() is None:
            store.create(BOOTSTRAP_SNAPSHOT_ID, bootstrap_checkpoint(voters))
    finally:
        store.close()
