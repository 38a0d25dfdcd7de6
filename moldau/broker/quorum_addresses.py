"""Where this node reaches the other controllers (the address book behind `QuorumTransport` and
`ControllerChannel`; Kafka's RequestManager bootstrap nodes and the voters' endpoints).

The candidates for a node, in order: the static voters (`controller.quorum.voters`); with
dynamic voters (KIP-853), the endpoint the voter set in the metadata log names (the Raft node's,
read each time so a voter change is seen at once); the endpoint learned from answers (a leader
names itself in Fetch and BeginQuorumEpoch, so an observer that knows only the bootstrap
servers finds the leader before it has fetched the voter set); the bootstrap servers
(`controller.quorum.bootstrap.servers`), under the negative ids -2, -3, ... the Raft core
fetches from when it knows no voter. A node that cannot be reached at its first candidate is
tried at the next (`unreachable`): a voter restarted on another address leads at once, before
the voter set names its new endpoint, and the others must follow it there.
"""

from __future__ import annotations

from collections.abc import Callable

from moldau.config.cluster import BootstrapServer, ClusterLayout, Voter
from moldau.raft.voter_set import VoterSet

Address = tuple[str, int]


def bootstrap_ids(count: int) -> tuple[int, ...]:
    """The ids the core sends to bootstrap server 0, 1, ... under (Kafka's -2, -3, ...)."""
    return tuple(-(index + 2) for index in range(count))


class QuorumAddresses:
    def __init__(
        self,
        *,
        voters: tuple[Voter, ...] = (),
        bootstrap_servers: tuple[BootstrapServer, ...] = (),
        listener_name: str = "CONTROLLER",
    ) -> None:
        self._static = {voter.node_id: (voter.host, voter.port) for voter in voters}
        self._bootstrap = {
            node_id: (server.host, server.port)
            for node_id, server in zip(
                bootstrap_ids(len(bootstrap_servers)), bootstrap_servers, strict=True
            )
        }
        self._learned: dict[int, Address] = {}
        self._rotation: dict[int, int] = {}  # which candidate of a node to use
        self.listener_name = listener_name
        self.voter_set: Callable[[], VoterSet] | None = None  # the Raft node's, once it runs

    @classmethod
    def of(cls, layout: ClusterLayout) -> QuorumAddresses:
        names = layout.controller_listener_names
        return cls(
            voters=layout.voters,
            bootstrap_servers=layout.bootstrap_servers,
            listener_name=names[0] if names else "CONTROLLER",
        )

    @property
    def bootstrap_ids(self) -> tuple[int, ...]:
        return tuple(self._bootstrap)

    def candidates(self, node_id: int) -> list[Address]:
        found: list[Address | None] = [self._static.get(node_id)]
        if self.voter_set is not None:
            voter = self.voter_set().get(node_id)
            if voter is not None and voter.endpoints:
                named = [e for e in voter.endpoints if e.name == self.listener_name]
                endpoint = (named or list(voter.endpoints))[0]
                found.append((endpoint.host, endpoint.port))
        found += [self._learned.get(node_id), self._bootstrap.get(node_id)]
        return list(dict.fromkeys(a for a in found if a is not None))

    def get(self, node_id: int) -> Address | None:
        candidates = self.candidates(node_id)
        if not candidates:
            return None
        return candidates[self._rotation.get(node_id, 0) % len(candidates)]

    def unreachable(self, node_id: int, address: Address) -> None:
        """Connecting to `node_id` at `address` failed: use its next candidate from now on."""
        if self.get(node_id) == address and len(self.candidates(node_id)) > 1:
            self._rotation[node_id] = self._rotation.get(node_id, 0) + 1

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, int) and self.get(node_id) is not None

    def __getitem__(self, node_id: int) -> Address:
        address = self.get(node_id)
        if address is None:
            raise KeyError(node_id)
        return address

    def learn(self, node_id: int, host: str, port: int) -> None:
        """An answer named where `node_id` listens."""
        if node_id >= 0 and host and port > 0:
            self._learned[node_id] = (host, port)
