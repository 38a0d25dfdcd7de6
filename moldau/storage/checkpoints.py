"""Checkpoint files in Kafka's text formats, written atomically (tmp file, fsync, rename).

recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint (high watermarks), cleaner-offset-checkpoint:
    0                      version
    <n>                    number of entries
    <topic> <partition> <offset>     n lines

<partition dir>/leader-epoch-checkpoint:
    0
    <n>
    <epoch> <start offset>           n lines

<partition dir>/partition.metadata:
    version: 0
    topic_id: <topic id, Kafka's base64 form of the UUID>
"""

from __future__ import annotations

import base64
import uuid

from moldau.storage.filesystem import FileSystem
from moldau.types import TopicPartition

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "topic_id_text",
    "write_epoch_checkpoint",
    "write_offset_checkpoint",
    "write_partition_metadata",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


class CheckpointError(ValueError):
    """A checkpoint file that does not parse."""


def _lines(filesystem: FileSystem, path: str) -> list[str] | None:
    if not filesystem.exists(path):
        return None
    text = filesystem.read_file(path).decode("utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointError(f"{path}: unsupported checkpoint version or missing count")
    count = int(lines[1])
    if len(lines) != count + 2:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(lines) - 2}")
    return lines[2:]


def read_offset_checkpoint(filesystem: FileSystem, path: str) -> dict[TopicPartition, int]:
    entries = _lines(filesystem, path)
    result: dict[TopicPartition, int] = {}
    for line in entries or []:
        topic, partition, offset = line.split()
        result[TopicPartition(topic, int(partition))] = int(offset)
    return result


def write_offset_checkpoint(
    filesystem: FileSystem, path: str, offsets: dict[TopicPartition, int]
) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    filesystem.write_file_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_epoch_checkpoint(filesystem: FileSystem, path: str) -> list[tuple[int, int]]:
    entries = _lines(filesystem, path)
    result: list[tuple[int, int]] = []
    for line in entries or []:
        epoch, start_offset = line.split()
        result.append((int(epoch), int(start_offset)))
    return result


def write_epoch_checkpoint(
    filesystem: FileSystem, path: str, entries: list[tuple[int, int]]
) -> None:
    lines = ["0", str(len(entries))] + [f"{epoch} {offset}" for epoch, offset in entries]
    filesystem.write_file_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


def topic_id_text(topic_id: object) -> str:
    """Kafka prints a topic id as URL-safe base64 of its 16 bytes, without padding."""
    if isinstance(topic_id, uuid.UUID):
        return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")
    return str(topic_id)


def read_partition_metadata(filesystem: FileSystem, path: str) -> str | None:
    if not filesystem.exists(path):
        return None
    fields: dict[str, str] = {}
    for line in filesystem.read_file(path).decode("utf-8").splitlines():
        if ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip()] = value.strip()
    if fields.get("version") != "0":
        raise CheckpointError(f"{path}: unsupported version")
    return fields.get("topic_id")


def write_partition_metadata(filesystem: FileSystem, path: str, topic_id: object) -> None:
    text = f"version: 0\ntopic_id: {topic_id_text(topic_id)}\n"
    filesystem.write_file_atomic(path, text.encode("utf-8"))
