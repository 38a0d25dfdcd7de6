"""The invariant checkers can fail: nodes with a planted bug are caught within a few seeds."""

from __future__ import annotations

import pytest

from moldau.raft.events import CommitUpTo, RaftAction
from moldau.raft.node import RaftNode, Role
from tests.simulation.invariants import InvariantViolation
from tests.simulation.scenarios import run_with_faults

SEEDS_TO_CATCH = 400


class VotesTwice(RaftNode):
    """Grants a vote to any up-to-date candidate, even after voting for another this epoch."""

    def _can_grant_vote(self, candidate_id: int, *, up_to_date: bool, pre_vote: bool) -> bool:
        if not pre_vote and self.role in (Role.UNATTACHED, Role.PROSPECTIVE):
            return up_to_date
        return super()._can_grant_vote(candidate_id, up_to_date=up_to_date, pre_vote=pre_vote)


class CommitsOnItsOwnFlush(RaftNode):
    """A leader that counts an entry committed once it alone has flushed it."""

    def _advance_high_watermark(self, now: float, actions: list[RaftAction]) -> None:
        leader = self._leader
        if leader is not None and self.flushed_offset > max(
            self.high_watermark, leader.epoch_start_offset
        ):
            self.high_watermark = self.flushed_offset
            actions.append(CommitUpTo(high_watermark=self.high_watermark))


class VotesForStaleLogs(RaftNode):
    """Ignores how up to date a candidate's log is."""

    def _can_grant_vote(self, candidate_id: int, *, up_to_date: bool, pre_vote: bool) -> bool:
        return super()._can_grant_vote(candidate_id, up_to_date=True, pre_vote=pre_vote)


class CommitsEarlierEpochs(RaftNode):
    """A new leader that commits entries of earlier epochs once a majority holds them, without
    waiting for an entry of its own epoch (Figure 8 of the Raft paper)."""

    def _become_leader(self, now: float, actions: list[RaftAction]) -> None:
        super()._become_leader(now, actions)
        assert self._leader is not None
        self._leader.epoch_start_offset = -1


@pytest.mark.parametrize(
    ("bug", "voters"),
    [
        (VotesTwice, (1, 2, 3)),
        (CommitsOnItsOwnFlush, (1, 2, 3)),
        (VotesForStaleLogs, (1, 2, 3)),
        (CommitsEarlierEpochs, (1, 2, 3, 4, 5)),
    ],
)
def test_a_planted_bug_is_caught(bug, voters):
    for seed in range(SEEDS_TO_CATCH):
        try:
            run_with_faults(seed, voters=voters, node_factory=bug)
        except InvariantViolation:
            return
    pytest.fail(f"{bug.__name__} went unnoticed for {SEEDS_TO_CATCH} seeds")
