"""The invariant checkers can fail: nodes with a planted bug are caught within a few seeds."""

from __future__ import annotations

import pytest

from moldau.raft.events import CommitUpTo, RaftAction
from moldau.raft.log import LogEntry
from moldau.raft.node import RaftNode, Role
from moldau.raft.quorum import QuorumState
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState
from moldau.raft.replication import Replication
from moldau.raft.voting import Elections
from tests.simulation.cluster import SimulatedCluster
from tests.simulation.invariants import InvariantViolation
from tests.simulation.scenarios import recover, run_with_faults

FIVE = (1, 2, 3, 4, 5)

SEEDS_TO_CATCH = 400


class _ElectionsVotingTwice(Elections):
    def can_grant_vote(self, candidate_id: int, *, up_to_date: bool, pre_vote: bool) -> bool:
        if not pre_vote and self.quorum.role in (Role.UNATTACHED, Role.PROSPECTIVE):
            return up_to_date
        return super().can_grant_vote(candidate_id, up_to_date=up_to_date, pre_vote=pre_vote)


class VotesTwice(RaftNode):
    """Grants a vote to any up-to-date candidate, even after voting for another this epoch."""

    elections_class = _ElectionsVotingTwice


class _ReplicationCommittingOnItsOwnFlush(Replication):
    def advance_high_watermark(self, now: float, actions: list[RaftAction]) -> None:
        quorum = self.quorum
        leader = quorum.leader
        if leader is not None and quorum.flushed_offset > max(
            quorum.high_watermark, leader.epoch_start_offset
        ):
            quorum.high_watermark = quorum.flushed_offset
            actions.append(CommitUpTo(high_watermark=quorum.high_watermark))


class CommitsOnItsOwnFlush(RaftNode):
    """A leader that counts an entry committed once it alone has flushed it."""

    replication_class = _ReplicationCommittingOnItsOwnFlush


class _ElectionsIgnoringLogs(Elections):
    def can_grant_vote(self, candidate_id: int, *, up_to_date: bool, pre_vote: bool) -> bool:
        return super().can_grant_vote(candidate_id, up_to_date=True, pre_vote=pre_vote)


class VotesForStaleLogs(RaftNode):
    """Ignores how up to date a candidate's log is."""

    elections_class = _ElectionsIgnoringLogs


class _QuorumCommittingEarlierEpochs(QuorumState):
    def become_leader(self, now: float, actions: list[RaftAction]) -> None:
        super().become_leader(now, actions)
        assert self.leader is not None
        self.leader.epoch_start_offset = -1


class CommitsEarlierEpochs(RaftNode):
    """A new leader that commits entries of earlier epochs once a majority holds them, without
    waiting for an entry of its own epoch (Figure 8 of the Raft paper)."""

    quorum_class = _QuorumCommittingEarlierEpochs


@pytest.mark.parametrize("bug", [VotesTwice, CommitsOnItsOwnFlush, VotesForStaleLogs])
def test_a_planted_bug_is_caught(bug):
    for seed in range(SEEDS_TO_CATCH):
        try:
            run_with_faults(seed, voters=(1, 2, 3), node_factory=bug)
        except InvariantViolation:
            return
    pytest.fail(f"{bug.__name__} went unnoticed for {SEEDS_TO_CATCH} seeds")


def run_figure_8(node_factory) -> SimulatedCluster:
    """Raft's Figure 8 on five voters. Nodes 1 and 2 hold an entry of epoch 2 at offset 1 that
    node 5 (which led epoch 3) never saw; node 5 holds its own, of epoch 3. Node 1 or 2 is
    elected in epoch 4 while 4 and 5 are cut off, and copies its epoch-2 entry to node 3 (one
    entry per fetch) - a majority now holds it, but not yet the new epoch's own entry. Then
    that leader and the other holder vanish, and node 5 is elected with 3 and 4: its epoch-3
    entry replaces the epoch-2 one everywhere. Fine, unless a leader called that entry
    committed."""
    cluster = SimulatedCluster(
        seed=8, voters=FIVE, config=QuorumConfig(fetch_max_bytes=100), node_factory=node_factory
    )
    first = LogEntry(base_offset=0, epoch=1, records=(b"leader 1",), is_control=True)
    for node_id, tail in [
        (1, [LogEntry(base_offset=1, epoch=2, records=(b"x",))]),
        (2, [LogEntry(base_offset=1, epoch=2, records=(b"x",))]),
        (3, []),
        (4, []),
        (5, [LogEntry(base_offset=1, epoch=3, records=(b"y",))]),
    ]:
        node = cluster.nodes[node_id]
        for entry in [first, *tail]:
            node.disk.append(entry)
        node.disk.flush()
        node.store.write(ElectionState(epoch=3, voters=FIVE))
    cluster.isolate(4)
    cluster.isolate(5)
    cluster.start_all()

    def copied_to_node_3() -> bool:
        leader = cluster.leader_id()
        if leader is None:
            return False
        progress = cluster.nodes[leader].raft.describe().voters
        return next(v for v in progress if v.replica_id == 3).log_end_offset >= 2

    assert cluster.run_for(20.0, stop=copied_to_node_3)
    old = cluster.leader_id()
    other = 2 if old == 1 else 1
    for gone in (old, other):
        cluster.isolate(gone)
        cluster.crash(gone)
    cluster.heal()
    for gone in (old, other):
        cluster.isolate(gone)
    assert cluster.run_for(20.0, stop=lambda: cluster.leader_id() == 5)
    cluster.heal()
    for gone in (old, other):
        cluster.start(gone)
    recover(cluster)
    cluster.checker.assert_converged()
    return cluster


def test_figure_8_commits_nothing_that_is_later_lost():
    cluster = run_figure_8(RaftNode)
    # The epoch-2 entry was never committed; node 5's took its place.
    assert cluster.checker.committed[1].records == (b"y",)


def test_figure_8_catches_a_leader_that_commits_an_earlier_epochs_entry():
    with pytest.raises(InvariantViolation, match="leads without the committed entry"):
        run_figure_8(CommitsEarlierEpochs)
