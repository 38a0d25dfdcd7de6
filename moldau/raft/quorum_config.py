"""The quorum's timing settings (Kafka's QuorumConfig).

Timeouts keep Kafka's `controller.quorum.*` names and defaults. The voter set is in
`voter_set.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

PROPERTY_NAMES = {
    "election_timeout_ms": "controller.quorum.election.timeout.ms",
    "fetch_timeout_ms": "controller.quorum.fetch.timeout.ms",
    "election_backoff_max_ms": "controller.quorum.election.backoff.max.ms",
    "request_timeout_ms": "controller.quorum.request.timeout.ms",
    "retry_backoff_ms": "controller.quorum.retry.backoff.ms",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumConfig:
    # An election starts this long (plus a uniform jitter up to as much again) after the last
    # sign of a leader; a follower waits fetch_timeout_ms without a successful fetch.
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    # Not configurable in Kafka: how long the leader holds a fetch with nothing new, and how
    # much one fetch or snapshot chunk carries.
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    snapshot_chunk_bytes: int = 1024 * 1024

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard from a majority for this long resigns (check-quorum)."""
        return self.fetch_timeout_ms * 3 // 2

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> QuorumConfig:
        """Read the `controller.quorum.*` timeouts that `properties` sets; defaults elsewhere."""
        values: dict[str, int] = {}
        for field in fields(cls):
            name = PROPERTY_NAMES.get(field.name)
            if name is not None and properties.get(name) is not None:
                values[field.name] = int(str(properties[name]))
        return cls(**values)
