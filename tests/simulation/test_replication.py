"""Seeded runs of one partition's data path on three brokers under crashes (with lost and torn
unsynced writes), restarts, lost messages, late metadata and zombie leaders; invariants after
every step and after healing (see replication.py). A failure prints the command that replays
its seed."""

from __future__ import annotations

from moldau.replication.replica_tracker import ReplicaTracker
from moldau.storage import PartitionLog
from tests.simulation.replication import InvariantViolation, run_replication
from tests.simulation.seeds import run_seeds

SEEDS = 200
STEPS = 600


def test_acknowledged_records_survive_and_replicas_converge():
    results = run_seeds(
        "test_acknowledged_records_survive_and_replicas_converge",
        SEEDS,
        lambda seed: run_replication(seed, STEPS),
    )
    # The runs did something: records acknowledged, faults injected, leaders elected.
    assert sum(r.acknowledged for r in results) > 50 * len(results)
    assert sum(r.faults for r in results) > 3 * len(results)
    assert sum(r.elections for r in results) > len(results)
    # Transactions committed and aborted, read at read_committed from leaders and followers.
    assert sum(r.transactions for r in results) > 5 * len(results)
    assert sum(r.read_committed for r in results) > 50 * len(results)


# --- the checker can fail: planted bugs are caught within a few seeds ------------------------

SEEDS_TO_CATCH = 60


def _caught(monkeypatch, target, name, replacement) -> str:
    monkeypatch.setattr(target, name, replacement)
    for seed in range(SEEDS_TO_CATCH):
        try:
            run_replication(seed, STEPS)
        except InvariantViolation as violation:
            return str(violation)
    raise AssertionError(f"{name} planted, no violation in {SEEDS_TO_CATCH} seeds")


def test_a_leader_committing_on_its_own_log_end_is_caught(monkeypatch):
    """acks=all without waiting for the ISR: acknowledged records are lost on failover."""
    found = _caught(
        monkeypatch,
        ReplicaTracker,
        "high_watermark",
        lambda self, leader_end_offset: leader_end_offset,
    )
    assert "acknowledged" in found or "high watermark" in found


def test_a_follower_ignoring_divergence_is_caught(monkeypatch):
    """A former leader's unreplicated tail kept: the replicas end different."""
    original = PartitionLog.truncate_to

    def keep_everything(self, offset):
        return self.log_end_offset

    found = _caught(monkeypatch, PartitionLog, "truncate_to", keep_everything)
    assert original is not keep_everything
    assert "differ" in found or "acknowledged" in found or "converge" in found


def test_read_committed_past_open_transactions_is_caught(monkeypatch):
    """A last stable offset that ignores open transactions: read_committed returns records of
    a transaction that is later aborted."""
    found = _caught(
        monkeypatch, PartitionLog, "last_stable_offset", property(lambda self: self.high_watermark)
    )
    assert "aborted" in found or "never committed" in found


def test_read_committed_without_the_aborted_transactions_is_caught(monkeypatch):
    """Fetches that leave out the aborted transactions of the range: the consumer keeps an
    aborted transaction's records."""
    found = _caught(monkeypatch, PartitionLog, "aborted_transactions", lambda self, s, e: [])
    assert "aborted" in found
