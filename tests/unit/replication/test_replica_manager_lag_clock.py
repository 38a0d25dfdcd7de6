"""replica.lag.time.max.ms on the leader's monotonic clock: a wall-clock step on the leader
neither drops its caught-up followers from the ISR nor keeps a silent one in it."""

from __future__ import annotations

import pytest

from moldau.clock import ManualClock
from moldau.replication.partition import Partition
from moldau.replication.replica_manager import PartitionState, ReplicaManager
from moldau.replication.replica_tracker import IsrChange
from moldau.types import TopicPartition

TP = TopicPartition("events", 0)
LAG_MS = 2_000


class _Log:
    """What a leader's partition reads of its log here: its end and high watermark."""

    log_end_offset = 10
    high_watermark = 10

    def update_config(self, config: object) -> None:
        pass

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        pass

    def update_high_watermark(self, offset: int) -> None:
        self.high_watermark = offset


def _leader(clock: ManualClock) -> tuple[ReplicaManager, list[IsrChange]]:
    manager = ReplicaManager(None, node_id=1, clock=clock, replica_lag_time_max_ms=LAG_MS)  # type: ignore[arg-type]
    partition = Partition(TP, _Log(), local_node_id=1)  # type: ignore[arg-type]
    manager.partitions[TP] = partition
    state = PartitionState(
        topic_id=None, leader=1, leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2)
    )
    manager.become_leader_or_follower(TP, state, config=None)  # type: ignore[arg-type]
    proposed: list[IsrChange] = []
    manager.on_isr_change = lambda tp, partition, change: proposed.append(change)
    manager.record_follower_fetch(TP, partition, 2, fetch_offset=10)
    return manager, proposed


@pytest.mark.parametrize("jump_ms", [7_200_000, -7_200_000])
def test_a_wall_clock_step_on_the_leader_changes_no_isr(jump_ms: int) -> None:
    clock = ManualClock()
    manager, proposed = _leader(clock)
    clock.jump_wall(jump_ms)
    manager.check_isr()
    assert proposed == []
    clock.advance(LAG_MS + 1)  # the follower silent past the lag time: it leaves the ISR
    manager.check_isr()
    assert proposed == [IsrChange(new_isr=(1,), removed=(2,))]
