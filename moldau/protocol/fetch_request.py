"""What a Fetch request says of its sender: a follower's replica id and broker epoch
(`replica_id` before v15, `replica_state` from v15), or none for a consumer."""

from __future__ import annotations

from typing import Any


def replica_of(request: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's fetch; (-1, -1) for a consumer's."""
    state = getattr(request, "replica_state", None)
    if state is not None and int(state.replica_id) >= 0:
        return int(state.replica_id), int(state.replica_epoch)
    return int(getattr(request, "replica_id", -1)), -1
