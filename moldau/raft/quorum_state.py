"""The `quorum-state` file: the election state a Raft voter must not forget (Kafka's QuorumStateData).

Stored as JSON beside the metadata log, keys as Kafka writes them:
`{"leaderId": 1, "leaderEpoch": 3, "votedId": 1, "appliedOffset": 0, "currentVoters":
[{"voterId": 1}], "data_version": 0}`. It is written atomically (temporary file, fsync, rename,
fsync of the directory) before the node acts on a new epoch or vote, so a restarted voter never
votes twice in one epoch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from moldau.raft._files import write_file_atomically

QUORUM_STATE_FILE_NAME = "quorum-state"


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionState:
    epoch: int = 0
    leader_id: int | None = None
    voted_id: int | None = None
    voters: tuple[int, ...] = ()


class FileQuorumStateStore:
    """Reads and atomically rewrites `<directory>/quorum-state`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, QUORUM_STATE_FILE_NAME)

    def read(self) -> ElectionState | None:
        if not os.path.exists(self.path):
            return None
        with open(self.path, encoding="utf-8") as handle:
            data = json.load(handle)
        leader_id = int(data.get("leaderId", -1))
        voted_id = int(data.get("votedId", -1))
        return ElectionState(
            epoch=int(data.get("leaderEpoch", 0)),
            leader_id=leader_id if leader_id >= 0 else None,
            voted_id=voted_id if voted_id >= 0 else None,
            voters=tuple(int(v["voterId"]) for v in data.get("currentVoters", [])),
        )

    def write(self, state: ElectionState) -> None:
        data = {
            "leaderId": state.leader_id if state.leader_id is not None else -1,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id if state.voted_id is not None else -1,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in state.voters],
            "data_version": 0,
        }
        write_file_atomically(self.path, json.dumps(data))


class MemoryQuorumStateStore:
    """A quorum-state store in memory, for tests and simulations."""

    def __init__(self, state: ElectionState | None = None) -> None:
        self.state = state
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1
