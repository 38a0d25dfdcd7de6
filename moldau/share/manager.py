"""`SharePartitionManager`: the share-partitions this broker leads, and the ShareFetch and
ShareAcknowledge paths through them (Kafka's SharePartitionManager and DelayedShareFetch).

A share-partition is created on the first fetch of its group from this leader, its start
offset set by the group's `share.auto.offset.reset`. A fetch acquires records for the member
from what `ReplicaManager.fetch` reads (the partition read path, within the group's
`share.isolation.level` bound) and sends only the batches holding them; with nothing to acquire
it waits, up to its `max_wait_ms`, for an append or for records released by others (an
acknowledgement, a lock running out, a member leaving). Acquisition locks run out on timers of
the node's monotonic clock.

What is kept, and what is lost (until `__share_group_state` makes it durable): the state lives
in memory here. A leader that keeps its leadership under a new leader epoch keeps the state,
delivery counts included, and releases every acquisition. A leadership that moves to another
broker, or a restart, loses it: the new leader starts the group from `share.auto.offset.reset`
(latest: unacknowledged records before the end are not delivered; earliest: every record is
delivered again, delivery counts from 1). A deleted share group's state is dropped here; other
brokers drop theirs only when they lose leadership or restart.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from moldau.clock import Clock, monotonic_ms
from moldau.config.share_groups import READ_UNCOMMITTED, ShareGroupConfig, ShareGroupSettings
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.fetch_response import FetchPartitionData
from moldau.replication.consumer_fetch import ConsumerFetchParams, PartitionFetch, upper_bound
from moldau.replication.offset_lookup import EARLIEST, LATEST, offset_for_timestamp
from moldau.replication.partition import Partition
from moldau.replication.replica_manager import ReplicaManager
from moldau.share.log_batches import acquired_bytes, read_batches
from moldau.share.sessions import ShareSession, ShareSessionCache
from moldau.share.share_partition import AcknowledgementBatch, AcquiredRecords, SharePartition
from moldau.types import TopicPartition

log = logging.getLogger(__name__)

# A share fetch reads at most this much of each partition (the request's max_bytes bounds it
# further): the records are copied to find the batches to acquire, and the member is sent only
# those holding acquired records, so reading more than max_records need is wasted work.
READ_MAX_BYTES = 4 * 1024 * 1024

LeaderOf = Callable[[TopicPartition], tuple[int, int] | None]


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareFetchPartition:
    """A partition a request names. `tp` is None when it cannot be read: `error` says why."""

    topic_id: uuid.UUID
    partition: int
    tp: TopicPartition | None
    error: int = 0


@dataclass(slots=True)
class SharePartitionAnswer:
    """One partition's part of a ShareFetch answer."""

    topic_id: uuid.UUID
    partition: int
    error_code: int = 0
    error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    current_leader: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchParams:
    group_id: str
    member_id: str
    settings: ShareGroupSettings
    max_wait_ms: int
    max_bytes: int
    max_records: int
    # The share session the fetch belongs to: once it is closed or replaced (the member's
    # connection closed, say) a fetch still waiting acquires nothing for a member that is gone.
    session: ShareSession | None = None


@dataclass(slots=True)
class _Hosted:
    """A share-partition this broker leads, in the leader epoch it was last seen in."""

    key: SharePartitionKey
    tp: TopicPartition
    leader_epoch: int
    share: SharePartition
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None


class SharePartitionManager:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        *,
        config: ShareGroupConfig,
        clock: Clock,
        leader_of: LeaderOf,
    ) -> None:
        self._replica_manager = replica_manager
        self._config = config
        self._clock = clock
        self._leader_of = leader_of
        self.sessions = ShareSessionCache(config.max_share_sessions)
        self._hosted: dict[SharePartitionKey, _Hosted] = {}

    def share_partition(self, key: SharePartitionKey) -> SharePartition | None:
        hosted = self._hosted.get(key)
        return hosted.share if hosted is not None else None

    # ---------------------------------------------------------------------------------- fetch

    def fetch(
        self,
        params: ShareFetchParams,
        partitions: Sequence[ShareFetchPartition],
        on_complete: Callable[[list[SharePartitionAnswer]], None],
    ) -> list[SharePartitionAnswer] | None:
        """Each partition's answer now, or None and `on_complete(answers)` once something can
        be acquired (or a partition's leadership moved), at the latest after `max_wait_ms`."""
        failed = False
        readable: list[_Hosted] = []
        for partition in partitions:
            hosted, _ = self._prepare(params, partition)
            if hosted is None:
                failed = True
            else:
                readable.append(hosted)
        if failed or params.max_wait_ms <= 0 or self._acquirable(readable, params):
            return self._read(params, partitions)

        def ready() -> bool:  # (no side effects: it runs inside the purgatory's wakes)
            return (
                self._acquirable(readable, params)
                or not self._session_current(params)
                or not all(
                    self._hosted.get(hosted.key) is hosted and self._leads_as_before(hosted)
                    for hosted in readable
                )
            )

        def done(_ready: bool) -> None:
            on_complete(self._read(params, partitions))

        self._replica_manager.watch_for_data(
            [hosted.tp for hosted in readable], ready, params.max_wait_ms, done
        )
        return None

    def _prepare(
        self, params: ShareFetchParams, partition: ShareFetchPartition
    ) -> tuple[_Hosted | None, SharePartitionAnswer | None]:
        """The share-partition to read, or the answer that says why there is none."""
        answer = SharePartitionAnswer(partition.topic_id, partition.partition)
        if partition.tp is None:
            answer.error_code = partition.error
            return None, answer
        key = SharePartitionKey(params.group_id, partition.topic_id, partition.partition)
        try:
            return self._hosted_for(key, partition.tp, params.settings), None
        except KafkaError as error:
            answer.error_code = int(error.code)
            answer.error_message = error.message
            if error.code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                answer.current_leader = self._leader_of(partition.tp)
            return None, answer

    def _session_current(self, params: ShareFetchParams) -> bool:
        session = params.session
        return session is None or self.sessions.get(session.group_id, session.member_id) is session

    def _acquirable(self, readable: Iterable[_Hosted], params: ShareFetchParams) -> bool:
        isolation = params.settings.isolation_level
        return any(
            hosted.share.can_acquire(upper_bound(partition.log, isolation))
            for hosted in readable
            if (partition := self._replica_manager.get_partition(hosted.tp)) is not None
        )

    def _read(
        self, params: ShareFetchParams, partitions: Sequence[ShareFetchPartition]
    ) -> list[SharePartitionAnswer]:
        """Read every partition that has something to acquire (through the replica manager's
        fetch, at once) and acquire for the member, within `max_records` overall."""
        answers: list[SharePartitionAnswer] = []
        reads: list[tuple[_Hosted, SharePartitionAnswer, PartitionFetch]] = []
        current = self._session_current(params)
        for partition in partitions:
            hosted, refused = self._prepare(params, partition)
            if hosted is None:
                assert refused is not None
                answers.append(refused)
                continue
            answer = SharePartitionAnswer(partition.topic_id, partition.partition)
            answers.append(answer)
            offset = hosted.share.next_fetch_offset()
            if offset is not None and current:
                read_bytes = min(params.max_bytes, READ_MAX_BYTES)
                fetch = PartitionFetch(hosted.tp, partition.partition, offset, read_bytes)
                reads.append((hosted, answer, fetch))
        if not reads:
            return answers
        fetched = self._replica_manager.fetch(
            [fetch for _, _, fetch in reads],
            ConsumerFetchParams(
                isolation_level=params.settings.isolation_level,
                max_bytes=params.max_bytes,
                min_bytes=0,
                max_wait_ms=0,
                allow_follower=False,
                leader_of=self._leader_of,
            ),
            lambda _answers: None,  # (never parked: max_wait_ms 0)
        )
        assert fetched is not None
        budget = max(params.max_records, 1)
        deadline = monotonic_ms(self._clock) + params.settings.record_lock_duration_ms
        for (hosted, answer, _), data in zip(reads, fetched, strict=True):
            if data.error_code == ErrorCode.offset_out_of_range:
                continue  # (the log start passed the read meanwhile: the next fetch moves on)
            if data.error_code:
                answer.error_code = data.error_code
                answer.current_leader = data.current_leader
                continue
            if budget <= 0:
                continue
            answer.acquired, answer.records = self._acquire(
                hosted, params, data, budget=budget, lock_deadline_ms=deadline
            )
            budget -= sum(run.last_offset - run.first_offset + 1 for run in answer.acquired)
        return answers

    def _acquire(
        self,
        hosted: _Hosted,
        params: ShareFetchParams,
        data: FetchPartitionData,
        *,
        budget: int,
        lock_deadline_ms: int,
    ) -> tuple[list[AcquiredRecords], bytes]:
        records = data.records
        raw = records if isinstance(records, bytes) else b"".join(r.read_bytes() for r in records)
        aborted = data.aborted_transactions
        if params.settings.isolation_level == READ_UNCOMMITTED:
            aborted = None
        batches = read_batches(raw, aborted)
        acquired = hosted.share.acquire(
            params.member_id,
            [read.batch for read in batches],
            max_records=budget,
            lock_deadline_ms=lock_deadline_ms,
        )
        self._schedule_locks(hosted)
        return acquired, acquired_bytes(raw, batches, acquired)

    # -------------------------------------------------------------------------- acknowledge

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        partition: ShareFetchPartition,
        batches: Sequence[AcknowledgementBatch],
    ) -> tuple[int, str | None, tuple[int, int] | None]:
        """(error code, message, current leader) of a member's acknowledgements of one
        partition."""
        if partition.tp is None:
            return partition.error, None, None
        key = SharePartitionKey(group_id, partition.topic_id, partition.partition)
        hosted = self._hosted.get(key)
        try:
            led = self._replica_manager.leader_partition(partition.tp)
            if hosted is None or not self._refresh(hosted, led):
                raise KafkaError(
                    ErrorCode.invalid_record_state,
                    "the records are not acquired here (this broker has no state for them: "
                    "they are delivered again)",
                )
            hosted.share.acknowledge(member_id, batches)
        except KafkaError as error:
            leader = None
            if error.code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                leader = self._leader_of(partition.tp)
            return int(error.code), error.message, leader
        self._released(hosted)
        return 0, None, None

    # ------------------------------------------------------------------------ members leave

    def release_member(self, group_id: str, member_id: str) -> None:
        """A member's share session closed: everything it holds here becomes available."""
        for hosted in list(self._hosted.values()):
            if hosted.key.group_id == group_id and (
                released := hosted.share.release_member(member_id)
            ):
                log.debug("released %d records of %s held by %s", released, hosted.tp, member_id)
                self._released(hosted)

    def connection_closed(self, connection: object) -> None:
        for session in self.sessions.close_connection(connection):
            log.debug("share session of %s closed with its connection", session.member_id)
            self.release_member(session.group_id, session.member_id)

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: its sessions and share-partitions here go."""
        self.sessions.close_group(group_id)
        for key in [key for key in self._hosted if key.group_id == group_id]:
            self._drop(key)

    # ------------------------------------------------------------------------- leadership

    def follow_leadership(self) -> None:
        """After a metadata change: drop the share-partitions this broker no longer leads,
        and release every acquisition of those it leads in a new leader epoch."""
        for key, hosted in list(self._hosted.items()):
            partition = self._replica_manager.get_partition(hosted.tp)
            if partition is None or not self._refresh(hosted, partition):
                self._drop(key)

    def _hosted_for(
        self, key: SharePartitionKey, tp: TopicPartition, settings: ShareGroupSettings
    ) -> _Hosted:
        partition = self._replica_manager.leader_partition(tp)
        if partition.topic_id is not None and partition.topic_id != key.topic_id:
            raise KafkaError(ErrorCode.unknown_topic_id)
        hosted = self._hosted.get(key)
        if hosted is not None and not self._refresh(hosted, partition):
            self._drop(key)
            hosted = None
        if hosted is None:
            start = self._start_offset(partition, settings)
            share = SharePartition(
                start_offset=start,
                delivery_count_limit=self._config.delivery_count_limit,
                max_in_flight_records=self._config.partition_max_record_locks,
            )
            hosted = _Hosted(key, tp, partition.leader_epoch, share)
            self._hosted[key] = hosted
            log.debug("share-partition %s of %s starts at %d", tp, key.group_id, start)
        hosted.share.move_start_to(partition.log.log_start_offset)
        return hosted

    def _leads_as_before(self, hosted: _Hosted) -> bool:
        partition = self._replica_manager.get_partition(hosted.tp)
        return (
            partition is not None
            and partition.is_leader
            and partition.leader_epoch == hosted.leader_epoch
        )

    def _refresh(self, hosted: _Hosted, partition: Partition) -> bool:
        """Whether this broker still leads the share-partition's partition with the log the
        state was built on; in a new leader epoch (this broker still leading) every
        acquisition is released, the state otherwise kept."""
        if not partition.is_leader:
            return False
        if partition.topic_id is not None and partition.topic_id != hosted.key.topic_id:
            return False
        if partition.leader_epoch != hosted.leader_epoch:
            if hosted.share.end_offset > partition.log.log_end_offset:
                return False  # (the log was truncated meanwhile: the state is not of it)
            hosted.leader_epoch = partition.leader_epoch
            if hosted.share.release_all():
                self._released(hosted)
        return True

    def _start_offset(self, partition: Partition, settings: ShareGroupSettings) -> int:
        """Where a group without state starts: share.auto.offset.reset."""
        reset = settings.auto_offset_reset
        if reset.strategy == "earliest":
            timestamp = EARLIEST
        elif reset.strategy == "by_duration":
            timestamp = self._clock.now_ms() - reset.duration_ms
        else:
            timestamp = LATEST
        found = offset_for_timestamp(partition, timestamp, settings.isolation_level, read=True)
        if found is None or found.offset < 0:  # nothing that recent: the end
            found = offset_for_timestamp(partition, LATEST, settings.isolation_level, read=True)
        assert found is not None
        return found.offset

    # --------------------------------------------------------------------- locks and wakes

    def _released(self, hosted: _Hosted) -> None:
        """Records may have become available: wake the fetches waiting on the partition."""
        self._schedule_locks(hosted)
        self._replica_manager.wake_fetches(hosted.tp)

    def _schedule_locks(self, hosted: _Hosted) -> None:
        deadline = hosted.share.next_lock_deadline()
        if deadline == hosted.timer_deadline:
            return
        if hosted.timer is not None:
            hosted.timer.cancel()
            hosted.timer = None
        hosted.timer_deadline = deadline
        if deadline is not None:
            delay_ms = max(deadline - monotonic_ms(self._clock), 0) + 1
            hosted.timer = asyncio.get_running_loop().call_later(
                delay_ms / 1000, self._expire_locks, hosted.key
            )

    def _expire_locks(self, key: SharePartitionKey) -> None:
        hosted = self._hosted.get(key)
        if hosted is None:
            return
        hosted.timer = None
        hosted.timer_deadline = None
        if hosted.share.expire_locks(monotonic_ms(self._clock)):
            self._replica_manager.wake_fetches(hosted.tp)
        self._schedule_locks(hosted)

    def _drop(self, key: SharePartitionKey) -> None:
        hosted = self._hosted.pop(key, None)
        if hosted is None:
            return
        if hosted.timer is not None:
            hosted.timer.cancel()
        log.info(
            "dropped the in-memory share-partition state of %s for group %s (not led here "
            "now); a leader starting it again starts from share.auto.offset.reset",
            hosted.tp,
            key.group_id,
        )
        self._replica_manager.wake_fetches(hosted.tp)

    def stop(self) -> None:
        for hosted in self._hosted.values():
            if hosted.timer is not None:
                hosted.timer.cancel()
        self._hosted.clear()
