"""What a partition's leader knows of its followers, and the ISR changes it asks for (Kafka's
`Partition` leader-side bookkeeping and `ReplicaState`, KIP-497). Pure: no clock, no I/O.

Each follower fetches with the offset it has *flushed* (Moldau's promise: a follower reports
only what survives its own crash), so its fetch offset is its durable log end offset. From the
fetches the leader keeps, per follower:

- `log_end_offset`: the last fetch offset;
- `last_caught_up_ms`: Kafka's rule — a fetch at or past the leader's log end offset of that
  moment catches the follower up now; one at or past the leader's end offset of its *previous*
  fetch caught it up as of that previous fetch.

The high watermark is the smallest log end offset over the ISR (the leader's own included).
While an ISR change is in flight to the controller, Kafka's "maximal ISR" counts: the union of
the committed ISR and the proposed one, since either may be the ISR a new leader is chosen from;
so the high watermark never gets ahead of a replica that might be in the ISR.

ISR changes proposed:
- expand: a follower outside the ISR whose log end offset reached the high watermark and the
  start of the leader's epoch (it holds everything committed, in this epoch's history);
- shrink: a follower inside it that has not been caught up for `replica.lag.time.max.ms`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class FollowerState:
    replica_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_offset_at_last_fetch: int = -1
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChange:
    """A proposed ISR for the controller (AlterPartition)."""

    new_isr: tuple[int, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()


class ReplicaTracker:
    def __init__(self, *, local_id: int) -> None:
        self.local_id = local_id
        self.followers: dict[int, FollowerState] = {}
        self.isr: tuple[int, ...] = (local_id,)
        self.pending: IsrChange | None = None  # sent to the controller, not committed yet

    def reset(
        self, *, replicas: tuple[int, ...], isr: tuple[int, ...], now_ms: int, log_end_offset: int
    ) -> None:
        """A new leadership (or a new committed ISR): followers start as just caught up if they
        are in the ISR (Kafka gives them a full lag period), unknown otherwise."""
        old = self.followers
        self.followers = {}
        for replica in replicas:
            if replica == self.local_id:
                continue
            state = old.get(replica) or FollowerState(replica)
            if replica in isr and state.last_caught_up_ms < 0:
                state.last_caught_up_ms = now_ms
                state.leader_end_offset_at_last_fetch = log_end_offset
            self.followers[replica] = state
        self.isr = isr
        self.pending = None

    def committed(self, isr: tuple[int, ...]) -> None:
        """The controller committed an ISR (ours or another)."""
        self.isr = isr
        self.pending = None

    def record_fetch(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> FollowerState | None:
        """A follower's fetch; None if `replica_id` is not one of the replicas."""
        state = self.followers.get(replica_id)
        if state is None:
            return None
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.leader_end_offset_at_last_fetch >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        if log_start_offset >= 0:
            state.log_start_offset = log_start_offset
        state.last_fetch_ms = now_ms
        state.leader_end_offset_at_last_fetch = leader_end_offset
        if broker_epoch >= 0:
            state.broker_epoch = broker_epoch
        return state

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must respect while a change is in flight."""
        pending = self.pending
        if pending is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(pending.new_isr)))

    def high_watermark(self, leader_end_offset: int) -> int:
        offsets = [leader_end_offset]
        for replica in self.maximal_isr:
            if replica == self.local_id:
                continue
            state = self.followers.get(replica)
            offsets.append(state.log_end_offset if state is not None else 0)
        return max(min(offsets), 0)

    def low_watermark(self, leader_start_offset: int, alive: set[int] | None = None) -> int:
        """The smallest log start offset over the replicas on live brokers (the leader's own
        included): records below it are gone from every such replica (Kafka's low watermark,
        what DeleteRecords waits for). A follower not heard from yet counts as 0."""
        starts = [leader_start_offset]
        for replica, state in self.followers.items():
            if alive is None or replica in alive:
                starts.append(max(state.log_start_offset, 0))
        return min(starts)

    def proposed_change(
        self,
        *,
        now_ms: int,
        high_watermark: int,
        epoch_start_offset: int,
        lag_max_ms: int,
        alive: set[int] | None = None,
    ) -> IsrChange | None:
        """The ISR change to send the controller now, if any (one at a time)."""
        if self.pending is not None:
            return None
        isr = set(self.isr)
        removed = [
            replica
            for replica in self.isr
            if replica != self.local_id
            and (state := self.followers.get(replica)) is not None
            and now_ms - state.last_caught_up_ms > lag_max_ms
        ]
        threshold = max(high_watermark, epoch_start_offset)
        added = [
            replica
            for replica, state in self.followers.items()
            if replica not in isr
            and state.log_end_offset >= threshold
            and state.last_fetch_ms >= 0
            and (alive is None or replica in alive)
        ]
        if not removed and not added:
            return None
        new_isr = tuple(sorted((isr - set(removed)) | set(added)))
        return IsrChange(new_isr=new_isr, added=tuple(added), removed=tuple(removed))
