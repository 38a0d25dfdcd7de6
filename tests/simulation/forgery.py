"""A forger on the quorum's network: schema-valid Raft requests whose fields lie, sent to random
live nodes at random times, from the seeded random source of the run.

What it can know is what anyone can read through DescribeQuorum: the voters, and each node's
epoch and leader. Two kinds of lie:

- refused ones, which a node must answer with an error and nothing else: another cluster id
  (or an empty one), voter keys naming another node or directory, another voter named leader
  of the receiver's own epoch (the probe's BeginQuorumEpoch), a sender speaking as the
  receiver, epochs no election could follow, fetches from nodes that are not voters or with a
  voter's id and another directory, absurd fetch offsets and epochs, snapshot fetches of
  snapshots that do not exist;
- disruptive ones that Raft must take (as Kafka takes them), which may cost an election but
  never a committed entry: a vote request or a leader's claim at a later epoch, in a voter's
  name or in a stranger's.

Not sent, because no quorum member can tell them from the truth (the controller listener's
authentication is what keeps them out): a fetch in a voter's own name at an offset that voter
could have reached (a leader counting it may commit what a majority does not hold), and a
claim of a later epoch to an observer. An observer moved to an epoch the quorum has not
reached ignores every answer from the quorum's older epoch and, unable to stand, stays there
until the quorum passes it (Kafka's observers alike); a voter stranded so stands, and the
leader steps aside for its pre-vote.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RaftRequest,
    VoteRequest,
)
from moldau.raft.node import LAST_EPOCH

if TYPE_CHECKING:
    from tests.simulation.cluster import SimulatedCluster

# Correlation ids of forged requests: their answers reach the node named as sender, whose
# requests never carry ids this high, and are dropped there as answers to nothing.
FORGED_CORRELATION_IDS = 1 << 30
# Ids of nodes that do not exist.
STRANGERS = (90, 91, 92)

Forgery = tuple[int, RaftRequest]  # (the sender it names, the request)


class Forger:
    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.random: random.Random = cluster.random
        self.sent: collections.Counter[str] = collections.Counter()
        self._correlation_ids = FORGED_CORRELATION_IDS
        self.refused_kinds: list[Callable[[int], Forgery]] = [
            self.another_cluster,
            self.another_voter_key,
            self.leader_of_the_current_epoch,
            self.in_the_receivers_name,
            self.last_epoch,
            self.fetch_from_a_stranger,
            self.absurd_fetch,
            self.absurd_snapshot_fetch,
        ]
        if cluster.dynamic:
            # (static voters have no directory ids: such a fetch is the voter's own to them)
            self.refused_kinds.append(self.fetch_with_a_replaced_disk)
        self.disruptive_kinds: list[Callable[[int], Forgery]] = [
            self.vote_at_a_later_epoch,
            self.leader_at_a_later_epoch,
        ]

    def schedule(
        self, *, until: float, disruptive_until: float = 0.0, mean_interval: float = 0.05
    ) -> None:
        """Forge a message every `mean_interval` on average until `until`; the disruptive kinds
        (one in ten) until `disruptive_until` only."""

        def forge() -> None:
            now = self.cluster.now
            if now >= until:
                return
            live = [n.node_id for n in self.cluster.live_nodes()]
            kinds, targets = self.refused_kinds, live
            if now < disruptive_until and self.random.random() < 0.1:
                # (to voters only: see the module's docstring)
                kinds = self.disruptive_kinds
                targets = [n for n in live if self.cluster.nodes[n].raft.is_voter]  # type: ignore[union-attr]
            if targets:
                make = self.random.choice(kinds)
                destination_id = self.random.choice(targets)
                source_id, message = make(destination_id)
                self.sent[make.__name__] += 1
                self.cluster.inject(source_id, destination_id, message)
            self.cluster.schedule(self.random.uniform(0.0, 2 * mean_interval), forge)

        self.cluster.schedule(self.random.uniform(0.0, mean_interval), forge)

    # What the forger reads about a node (as DescribeQuorum tells anyone).

    def _epoch(self, node_id: int) -> int:
        raft = self.cluster.nodes[node_id].raft
        return raft.epoch if raft is not None else 0

    def _log_end(self, node_id: int) -> tuple[int, int]:
        raft = self.cluster.nodes[node_id].raft
        return (raft.log_end_offset, raft.last_epoch) if raft is not None else (0, 0)

    def _other_voter(self, node_id: int) -> int:
        others = [v for v in self.cluster.voters if v != node_id]
        return self.random.choice(others or list(STRANGERS))

    def _correlation_id(self) -> int:
        self._correlation_ids += 1
        return self._correlation_ids

    def _any_sender(self, node_id: int) -> int:
        return self.random.choice([self._other_voter(node_id), *STRANGERS])

    # Refused lies.

    def another_cluster(self, node_id: int) -> Forgery:
        cluster_id = self.random.choice(["another-cluster", ""])
        epoch = self._epoch(node_id) + self.random.choice([0, 1, 5])
        source_id = self._any_sender(node_id)
        end, last_epoch = self._log_end(node_id)
        message = self.random.choice(
            [
                self._vote(source_id, node_id, epoch, end + 100, last_epoch, cluster_id),
                self._begin(source_id, node_id, epoch, cluster_id),
                self._end(source_id, epoch, cluster_id),
                self._fetch(source_id, epoch, end, last_epoch, cluster_id=cluster_id),
            ]
        )
        return source_id, message

    def another_voter_key(self, node_id: int) -> Forgery:
        source_id = self._other_voter(node_id)
        epoch = self._epoch(node_id) + self.random.choice([0, 1, 3])
        end, last_epoch = self._log_end(node_id)
        receiver, directory = self.random.choice(
            [(self._other_voter(node_id), None), (node_id, "directory-of-a-lost-disk")]
        )
        if self.random.random() < 0.5:
            message: RaftRequest = self._vote(
                source_id, receiver, epoch + 1, end + 100, last_epoch, directory=directory
            )
        else:
            message = self._begin(source_id, receiver, epoch, directory=directory)
        return source_id, message

    def leader_of_the_current_epoch(self, node_id: int) -> Forgery:
        """Another voter named leader of the epoch the receiver is in (the probe's packet when
        the receiver leads it), by BeginQuorumEpoch without a cluster id, or EndQuorumEpoch."""
        raft = self.cluster.nodes[node_id].raft
        epoch = self._epoch(node_id)
        known = raft.leader_id if raft is not None else None
        claimant = self._other_voter(node_id)
        if known is not None and claimant == known:
            # Naming the true leader is no lie: name another.
            others = [v for v in self.cluster.voters if v not in (node_id, known)]
            claimant = self.random.choice(others or list(STRANGERS))
        if self.random.random() < 0.7:
            return claimant, self._begin(claimant, -1, epoch, None)
        return claimant, self._end(claimant, epoch)

    def in_the_receivers_name(self, node_id: int) -> Forgery:
        epoch = self._epoch(node_id)
        end, last_epoch = self._log_end(node_id)
        message = self.random.choice(
            [
                self._vote(node_id, node_id, epoch + 1, end + 100, last_epoch),
                self._begin(node_id, node_id, epoch + 1),
                self._end(node_id, epoch),
                self._fetch(node_id, epoch, end, last_epoch),
                self._snapshot_fetch(node_id, epoch),
            ]
        )
        return node_id, message

    def last_epoch(self, node_id: int) -> Forgery:
        source_id = self._any_sender(node_id)
        end, last_epoch = self._log_end(node_id)
        message = self.random.choice(
            [
                self._vote(source_id, node_id, LAST_EPOCH, end + 100, last_epoch),
                self._begin(source_id, node_id, LAST_EPOCH),
                self._end(source_id, LAST_EPOCH),
            ]
        )
        return source_id, message

    def fetch_from_a_stranger(self, node_id: int) -> Forgery:
        source_id = self.random.choice(STRANGERS)
        end, last_epoch = self._log_end(node_id)
        offset = self.random.randint(0, end)
        epoch = self._epoch(node_id)
        return source_id, self._fetch(source_id, epoch, offset, min(last_epoch, epoch))

    def fetch_with_a_replaced_disk(self, node_id: int) -> Forgery:
        """A voter's id with a directory that is not its own, from the start of the log (what
        a voter whose disk was replaced sends)."""
        source_id = self._other_voter(node_id)
        epoch = self._epoch(node_id)
        return source_id, self._fetch(source_id, epoch, 0, 0, directory="directory-of-a-new-disk")

    def absurd_fetch(self, node_id: int) -> Forgery:
        """Offsets and epochs no replica could have: past the end of the receiver's log in its
        last epoch, negative, or an epoch far ahead."""
        source_id = self._any_sender(node_id)
        epoch = self._epoch(node_id)
        end, last_epoch = self._log_end(node_id)
        offset, fetched_epoch, current = self.random.choice(
            [
                (end + self.random.randint(1, 1 << 40), last_epoch, epoch),
                (-self.random.randint(1, 1 << 40), last_epoch, epoch),
                (end, -1, epoch),
                (end, epoch + 7, epoch),  # a last fetched epoch past the current one
                (end, last_epoch, epoch + self.random.randint(1, 1 << 20)),
                ((1 << 63) - 1, (1 << 31) - 2, epoch),
            ]
        )
        message = self._fetch(source_id, current, offset, fetched_epoch)
        if self.random.random() < 0.3:
            message = self._fetch(source_id, current, end, last_epoch, max_wait_ms=-5)
        return source_id, message

    def absurd_snapshot_fetch(self, node_id: int) -> Forgery:
        source_id = self._any_sender(node_id)
        epoch = self._epoch(node_id)
        return source_id, self._snapshot_fetch(source_id, epoch)

    # Disruptive claims Raft takes.

    def vote_at_a_later_epoch(self, node_id: int) -> Forgery:
        source_id = self._any_sender(node_id)
        end, last_epoch = self._log_end(node_id)
        epoch = self._epoch(node_id) + self.random.randint(1, 3)
        claimed_end = end + self.random.choice([-1, 0, 100])
        return source_id, self._vote(source_id, node_id, epoch, max(0, claimed_end), last_epoch)

    def leader_at_a_later_epoch(self, node_id: int) -> Forgery:
        claimant = self._any_sender(node_id)
        epoch = self._epoch(node_id) + self.random.randint(1, 3)
        if self.random.random() < 0.7:
            return claimant, self._begin(claimant, node_id, epoch)
        return claimant, self._end(claimant, epoch)

    # Building the requests (schema-valid: every field of its type and range).

    def _vote(
        self,
        source_id: int,
        receiver: int,
        epoch: int,
        last_offset: int,
        last_epoch: int,
        cluster_id: str | None = "simulated",
        *,
        directory: str | None = None,
    ) -> VoteRequest:
        return VoteRequest(
            correlation_id=self._correlation_id(),
            cluster_id=cluster_id,
            voter_id=receiver,
            replica_id=source_id,
            replica_epoch=epoch,
            last_offset_epoch=min(last_epoch, max(epoch - 1, 0)),
            last_offset=last_offset,
            pre_vote=self.random.random() < 0.3,
            voter_directory_id=directory,
        )

    def _begin(
        self,
        leader_id: int,
        receiver: int,
        epoch: int,
        cluster_id: str | None = "simulated",
        *,
        directory: str | None = None,
    ) -> BeginQuorumEpochRequest:
        return BeginQuorumEpochRequest(
            correlation_id=self._correlation_id(),
            cluster_id=cluster_id,
            voter_id=receiver,
            leader_id=leader_id,
            leader_epoch=epoch,
            voter_directory_id=directory,
        )

    def _end(
        self, leader_id: int, epoch: int, cluster_id: str | None = "simulated"
    ) -> EndQuorumEpochRequest:
        return EndQuorumEpochRequest(
            correlation_id=self._correlation_id(),
            cluster_id=cluster_id,
            leader_id=leader_id,
            leader_epoch=epoch,
            preferred_candidates=tuple(self.random.sample(self.cluster.voters, 1)),
        )

    def _fetch(
        self,
        source_id: int,
        epoch: int,
        offset: int,
        last_fetched_epoch: int,
        *,
        cluster_id: str | None = "simulated",
        directory: str | None = None,
        max_wait_ms: int = 0,
    ) -> FetchRequest:
        return FetchRequest(
            correlation_id=self._correlation_id(),
            cluster_id=cluster_id,
            replica_id=source_id,
            max_wait_ms=max_wait_ms,
            max_bytes=self.random.choice([0, 1, 1 << 20]),
            current_leader_epoch=epoch,
            fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch,
            log_start_offset=self.random.choice([-1, 0, offset]),
            partition_max_bytes=self.random.choice([-1, 0, 1 << 20]),
            high_watermark=self.random.choice([-1, offset, (1 << 63) - 1]),
            replica_directory_id=directory or self.random.choice([None, f"directory-{source_id}"]),
        )

    def _snapshot_fetch(self, source_id: int, epoch: int) -> FetchSnapshotRequest:
        return FetchSnapshotRequest(
            correlation_id=self._correlation_id(),
            cluster_id="simulated",
            replica_id=source_id,
            max_bytes=self.random.choice([-1, 0, 1 << 20]),
            current_leader_epoch=epoch,
            snapshot_id=OffsetAndEpoch(
                epoch=self.random.choice([-1, 0, epoch, LAST_EPOCH]),
                offset=self.random.choice([-1, 0, 1 << 62]),
            ),
            position=self.random.choice([-1, 0, 1 << 40]),
        )
