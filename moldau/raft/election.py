"""Counting votes and spacing elections apart (Kafka's EpochElection and election backoffs).

A prospective voter counts pre-votes, a candidate votes; each counts itself as granted. The
backoffs are Kafka's: after a lost election, a random multiple of 100 ms that doubles its range
with each retry; after a leader's EndQuorumEpoch, a delay that grows with a voter's place in the
leader's list of preferred successors, so the most caught-up voter stands first.
"""

from __future__ import annotations

import random

from moldau.raft.voter_set import VoterSet

RETRY_BACKOFF_BASE_MS = 100


class ElectionTally:
    def __init__(self, voters: VoterSet, local_id: int) -> None:
        self.voters = voters
        # (a node that an uncommitted change removed stands without a vote of its own)
        self.granted: set[int] = {local_id} if local_id in voters else set()
        self.rejected: set[int] = set()

    def record(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.voters or voter_id in self.granted:
            return
        if granted:
            self.rejected.discard(voter_id)
            self.granted.add(voter_id)
        else:
            self.rejected.add(voter_id)

    @property
    def is_won(self) -> bool:
        return len(self.granted) >= self.voters.majority

    @property
    def is_lost(self) -> bool:
        """So many voters said no that a majority can no longer be reached."""
        return len(self.voters) - len(self.rejected) < self.voters.majority

    def unrecorded_voters(self) -> list[int]:
        return [
            v for v in self.voters.voter_ids if v not in self.granted and v not in self.rejected
        ]


def random_election_timeout_ms(timeout_ms: int, rng: random.Random) -> int:
    """The configured timeout plus a uniform jitter in [0, timeout)."""
    return timeout_ms + rng.randrange(max(1, timeout_ms))


def lost_election_backoff_ms(retries: int, maximum_ms: int, rng: random.Random) -> int:
    """After the `retries`-th lost election: 0 to 2^retries - 1 times 100 ms, at most the max."""
    exponent = min(20, max(1, retries))
    return min(RETRY_BACKOFF_BASE_MS * rng.randrange(1 << exponent), maximum_ms)


def successor_backoff_ms(position: int, successors: int, maximum_ms: int) -> int:
    """How long the voter at `position` in a resigning leader's preferred successors waits
    before standing: the first at once, each next one twice as long, the last the maximum."""
    if position <= 0:
        return 0
    base = maximum_ms >> (successors - 1)
    return min(maximum_ms, base << (position - 1))
