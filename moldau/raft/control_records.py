"""Raft's own records in the metadata log and in snapshots (Kafka's ControlRecordType, KIP-853).

A control entry holds records of these kinds, each a JSON object (Moldau's form of Kafka's
messages; on the wire each carries Kafka's control-record key with its type):

    LEADER_CHANGE (2)   {"leaderId": 1, "voters": [1, 2, 3]}
    KRAFT_VERSION (5)   {"kraftVersion": 1}
    VOTERS (6)          {"voters": [{"voterId": 1, "voterDirectoryId": "...",
                                     "endpoints": [{"name": "CONTROLLER", "host": "...",
                                                    "port": 9093}]}]}

A snapshot of a quorum with dynamic voters starts with a header holding the kraft.version and
the voter set as of its end offset, before the state machine's bytes:

    magic   4 bytes  b"MRH1"
    length  uint32   bytes of the JSON that follows
    header  JSON     {"kraftVersion": 1, "voters": [...]}   (VOTERS's form)

A snapshot without the magic has no header (static voters, `kraft.version` 0). The bootstrap
checkpoint `moldau storage format` writes (end offset 0, epoch 0) is a header alone.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, Endpoint, VoterNode, VoterSet

LEADER_CHANGE = 2
KRAFT_VERSION = 5
VOTERS = 6

SNAPSHOT_HEADER_MAGIC = b"MRH1"
_HEADER_LENGTH = struct.Struct(">I")
_HEADER_PREFIX_BYTES = len(SNAPSHOT_HEADER_MAGIC) + _HEADER_LENGTH.size


def leader_change_payload(leader_id: int, voters: tuple[int, ...]) -> bytes:
    """The record of the control entry a leader starts its epoch with."""
    return json.dumps({"leaderId": leader_id, "voters": list(voters)}).encode("utf-8")


def kraft_version_payload(version: int) -> bytes:
    return json.dumps({"kraftVersion": version}).encode("utf-8")


def voters_payload(voters: VoterSet) -> bytes:
    return json.dumps({"voters": _voters_json(voters)}).encode("utf-8")


def control_record_type(payload: bytes) -> int:
    """Kafka's control record type of one of these records (LEADER_CHANGE for anything else,
    as every control record of a static quorum was)."""
    try:
        data = _json(payload)
    except ValueError:
        return LEADER_CHANGE
    if "kraftVersion" in data:
        return KRAFT_VERSION
    if "voters" in data and "leaderId" not in data:
        return VOTERS
    return LEADER_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlChanges:
    """What a control entry's records change: the kraft.version and the voter set."""

    kraft_version: int | None = None
    voters: VoterSet | None = None


def control_changes(records: tuple[bytes, ...]) -> ControlChanges:
    kraft_version: int | None = None
    voters: VoterSet | None = None
    for payload in records:
        kind = control_record_type(payload)
        if kind == KRAFT_VERSION:
            kraft_version = int(_json(payload)["kraftVersion"])
        elif kind == VOTERS:
            voters = _voters_from_json(_json(payload)["voters"])
    return ControlChanges(kraft_version=kraft_version, voters=voters)


# Snapshot headers.


def snapshot_header(kraft_version: int, voters: VoterSet) -> bytes:
    """The header a snapshot of a quorum with dynamic voters starts with."""
    body = json.dumps({"kraftVersion": kraft_version, "voters": _voters_json(voters)}).encode()
    return SNAPSHOT_HEADER_MAGIC + _HEADER_LENGTH.pack(len(body)) + body


def bootstrap_checkpoint(voters: VoterSet) -> bytes:
    """The bootstrap checkpoint (0-0) of a quorum formatted with dynamic voters."""
    return snapshot_header(KRAFT_VERSION_DYNAMIC, voters)


def split_snapshot(contents: bytes) -> tuple[ControlChanges | None, bytes]:
    """(the header, or None, and the state machine's bytes)."""
    header_length = _header_length(contents[:_HEADER_PREFIX_BYTES])
    if header_length is None:
        return None, contents
    end = _HEADER_PREFIX_BYTES + header_length
    return _parse_header(contents[_HEADER_PREFIX_BYTES:end]), contents[end:]


def read_snapshot_header(store: SnapshotStore, snapshot_id: Any) -> ControlChanges | None:
    """The header of a complete snapshot in `store`, reading only its first bytes."""
    prefix = store.read(snapshot_id, 0, _HEADER_PREFIX_BYTES)
    header_length = _header_length(prefix)
    if header_length is None:
        return None
    return _parse_header(store.read(snapshot_id, _HEADER_PREFIX_BYTES, header_length))


def _header_length(prefix: bytes) -> int | None:
    if len(prefix) < _HEADER_PREFIX_BYTES or not prefix.startswith(SNAPSHOT_HEADER_MAGIC):
        return None
    (length,) = _HEADER_LENGTH.unpack_from(prefix, len(SNAPSHOT_HEADER_MAGIC))
    return int(length)


def _parse_header(data: bytes) -> ControlChanges:
    parsed = _json(data)
    return ControlChanges(
        kraft_version=int(parsed["kraftVersion"]), voters=_voters_from_json(parsed["voters"])
    )


def _json(payload: bytes) -> dict[str, Any]:
    data = json.loads(payload.decode("utf-8"))  # (UnicodeDecodeError is a ValueError)
    if not isinstance(data, dict):
        raise ValueError(f"not a control record: {payload[:80]!r}")
    return data


def _voters_json(voters: VoterSet) -> list[dict[str, Any]]:
    return [
        {
            "voterId": voter.node_id,
            "voterDirectoryId": voter.directory_id,
            "endpoints": [
                {"name": e.name, "host": e.host, "port": e.port} for e in voter.endpoints
            ],
        }
        for voter in voters
    ]


def _voters_from_json(items: list[dict[str, Any]]) -> VoterSet:
    return VoterSet.of_nodes(
        VoterNode(
            node_id=int(item["voterId"]),
            directory_id=item.get("voterDirectoryId"),
            endpoints=tuple(
                Endpoint(name=str(e["name"]), host=str(e["host"]), port=int(e["port"]))
                for e in item.get("endpoints", ())
            ),
        )
        for item in items
    )
