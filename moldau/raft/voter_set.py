"""Who votes: the voter set and its history along the log (Kafka's VoterSet and VoterSetHistory,
KIP-853).

A voter is a node id and, with dynamic voters, the directory id of the log directory that holds
its metadata log, plus the endpoints other nodes reach it on (the core passes them through; the
transport connects to them). With `kraft.version` 0 the set is static (`controller.quorum.voters`,
ids only). With `kraft.version` 1 it is written into the log as VotersRecord control records
and into every snapshot's header; a voter change takes effect on a node as soon as the record is
in its log, committed or not, and is undone if that entry is truncated.

Invariants of `VoterSetHistory`: offsets strictly increase; the value at an offset is the last
set written at or before it, else the base (the static set, or the bootstrap snapshot's).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from moldau.protocol.uuids import uuid_from_text, uuid_to_text

KRAFT_VERSION_STATIC = 0
KRAFT_VERSION_DYNAMIC = 1


# Directory ids are Kafka Uuid strings; these give the wire's form.
directory_uuid = uuid_from_text
directory_id_of = uuid_to_text


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """A listener a voter is reached on (VotersRecord's Endpoint)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterNode:
    """One voter: its id, the directory id of its metadata log (None: static voters) and
    its endpoints."""

    node_id: int
    directory_id: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    def matches(self, node_id: int, directory_id: str | None) -> bool:
        """The same voter: the id, and the directory id when both sides know one."""
        return self.node_id == node_id and (
            self.directory_id is None or directory_id is None or self.directory_id == directory_id
        )


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters, sorted by id (at most one per id). May be empty: a node that joins later
    knows no voter until it has fetched the leader's log."""

    nodes: tuple[VoterNode, ...] = ()

    @classmethod
    def of(cls, voter_ids: Iterable[int]) -> VoterSet:
        """A static voter set (ids only); it must not be empty."""
        ids = sorted(set(voter_ids))
        if not ids:
            raise ValueError("a quorum needs at least one voter")
        return cls(tuple(VoterNode(node_id=i) for i in ids))

    @classmethod
    def of_nodes(cls, nodes: Iterable[VoterNode]) -> VoterSet:
        ordered = sorted(nodes, key=lambda n: n.node_id)
        ids = [n.node_id for n in ordered]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a voter set names a node twice: {ids}")
        return cls(tuple(ordered))

    @property
    def voter_ids(self) -> tuple[int, ...]:
        return tuple(n.node_id for n in self.nodes)

    def __contains__(self, node_id: object) -> bool:
        return any(n.node_id == node_id for n in self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[VoterNode]:
        return iter(self.nodes)

    def get(self, node_id: int) -> VoterNode | None:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        return None

    def has_voter(self, node_id: int, directory_id: str | None) -> bool:
        node = self.get(node_id)
        return node is not None and node.matches(node_id, directory_id)

    @property
    def majority(self) -> int:
        return len(self.nodes) // 2 + 1

    def is_majority(self, node_ids: Iterable[int]) -> bool:
        return len(set(node_ids) & set(self.voter_ids)) >= self.majority

    def adding(self, voter: VoterNode) -> VoterSet:
        return VoterSet.of_nodes((*self.nodes, voter))

    def removing(self, node_id: int) -> VoterSet:
        return VoterSet(tuple(n for n in self.nodes if n.node_id != node_id))

    def updating(self, voter: VoterNode) -> VoterSet:
        return VoterSet(tuple(voter if n.node_id == voter.node_id else n for n in self.nodes))

    def with_endpoints(self, node_id: int, endpoints: tuple[Endpoint, ...]) -> VoterSet:
        node = self.get(node_id)
        return self if node is None else self.updating(replace(node, endpoints=endpoints))


class VoterSetHistory:
    """The voter sets written in the log, by offset, over a base set."""

    def __init__(self, base: VoterSet, *, kraft_version: int = KRAFT_VERSION_STATIC) -> None:
        self.base = base
        self.base_kraft_version = kraft_version
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []
        self._kraft_versions: list[tuple[int, int]] = []  # (offset, version)

    @property
    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.base

    @property
    def kraft_version(self) -> int:
        return self._kraft_versions[-1][1] if self._kraft_versions else self.base_kraft_version

    @property
    def last_change_offset(self) -> int:
        """The offset of the newest VotersRecord in the log, or -1."""
        return self._offsets[-1] if self._offsets else -1

    def value_at(self, offset: int) -> VoterSet:
        """The voter set in force at `offset` (written at or before it)."""
        index = bisect.bisect_right(self._offsets, offset) - 1
        return self._sets[index] if index >= 0 else self.base

    def kraft_version_at(self, offset: int) -> int:
        version = self.base_kraft_version
        for at, value in self._kraft_versions:
            if at > offset:
                break
            version = value
        return version

    def add_voters(self, offset: int, voters: VoterSet) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"a voter set at {offset} after one at {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def add_kraft_version(self, offset: int, version: int) -> None:
        self._kraft_versions.append((offset, version))

    def truncate_from(self, offset: int) -> bool:
        """Forget what was written at or after `offset` (a truncated tail); True if the
        latest voter set changed."""
        before = self.latest
        index = bisect.bisect_left(self._offsets, offset)
        del self._offsets[index:]
        del self._sets[index:]
        self._kraft_versions = [(at, v) for at, v in self._kraft_versions if at < offset]
        return self.latest != before
