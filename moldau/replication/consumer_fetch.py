"""A consumer's fetch, Kafka's `ReplicaManager.fetchMessages` for clients with `Partition.
fetchRecords` and `DelayedFetch`.

Each partition is read from the fetch offset up to its bound: the high watermark under
read_uncommitted, the last stable offset under read_committed (with the aborted transactions of
the range read, which the consumer skips). A replica may be read by a consumer of Fetch v11+
(KIP-392) up to its own high watermark, and a leader may send a consumer of another rack to a
replica in its own (`preferred_read_replica`). A fetch whose partitions hold fewer than
`min_bytes` below their bounds parks in the purgatory until an append makes them ready or
`max_wait_ms` passes; the answer is read when the fetch completes, in the appending call chain.

Record data stays in the segment files: a partition's records are file regions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.fetch_response import FetchPartitionData
from moldau.replication.partition import Partition
from moldau.storage import PartitionLog
from moldau.types import TopicPartition

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
ENOUGH = 1 << 30  # a fetch with an error to answer stops waiting


def upper_bound(log: PartitionLog, isolation_level: int) -> int:
    """The offset a consumer may read up to: the last stable offset under read_committed, the
    high watermark otherwise."""
    return log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark


class HostedPartitions(Protocol):
    """What a consumer's fetch needs of the replica manager."""

    def readable_partition(
        self, tp: TopicPartition, current_leader_epoch: int = -1, *, allow_follower: bool
    ) -> Partition: ...

    def get_partition(self, tp: TopicPartition) -> Partition | None: ...

    def preferred_read_replica(self, partition: Partition, fetch_offset: int, rack: str) -> int: ...

    def watch_for_data(
        self,
        keys: Iterable[TopicPartition],
        ready: Callable[[], bool],
        max_wait_ms: int,
        on_done: Callable[[bool], None],
    ) -> None: ...

    @property
    def partitions(self) -> dict[TopicPartition, Partition]: ...

    @property
    def rack_of(self) -> Callable[[int], str | None] | None: ...


@dataclass(slots=True)
class PartitionFetch:
    """One partition asked for. `tp` is None when it is not read: `error` says why (an unknown
    topic, or one the principal may not read)."""

    tp: TopicPartition | None
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    error: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerFetchParams:
    isolation_level: int
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    allow_follower: bool  # Fetch v11+ (KIP-392)
    rack: str = ""
    # Where a partition this broker does not host lives: (leader, leader epoch) from the
    # metadata, None if the cluster has no such partition.
    leader_of: Callable[[TopicPartition], tuple[int, int] | None] = lambda _tp: None


def fetch(
    hosted: HostedPartitions,
    fetches: Sequence[PartitionFetch],
    params: ConsumerFetchParams,
    on_complete: Callable[[list[FetchPartitionData]], None],
) -> list[FetchPartitionData] | None:
    """Each partition's answer, in the order asked, now; or None when the fetch parked, and
    `on_complete(answers)` later (in the call chain of the append that made it ready, or at
    `max_wait_ms`). `on_complete` may raise; the purgatory logs it."""
    rack = params.rack if hosted.rack_of is not None else ""  # (no rack-aware selector: none)
    if (
        params.max_wait_ms <= 0
        or params.min_bytes <= 0
        or rack  # (a leader may have to send it elsewhere)
        or not _all_at_end(hosted, fetches, params)
    ):
        answers, total, errors = _read_all(hosted, fetches, params, rack)
        if total >= params.min_bytes or errors or params.max_wait_ms <= 0:
            return answers

    def done(_ready: bool) -> None:
        on_complete(_read_all(hosted, fetches, params, rack)[0])

    def ready() -> bool:
        return _bytes_available(hosted, fetches, params) >= params.min_bytes

    keys = [f.tp for f in fetches if f.tp is not None]
    hosted.watch_for_data(keys, ready, params.max_wait_ms, done)
    return None


def _read_all(
    hosted: HostedPartitions,
    fetches: Sequence[PartitionFetch],
    params: ConsumerFetchParams,
    rack: str,
) -> tuple[list[FetchPartitionData], int, bool]:
    """(answers, bytes read, whether an answer must go now: an error or a redirect)."""
    total = 0
    errors = False
    answers = []
    for partition_fetch in fetches:
        data = read_partition(
            hosted,
            partition_fetch,
            params,
            remaining=params.max_bytes - total,
            min_one_message=total == 0,
            rack=rack,
        )
        if data.error_code or data.preferred_read_replica >= 0:
            errors = True
        else:
            total += records_size(data.records)
        answers.append(data)
    return answers, total, errors


def read_partition(
    hosted: HostedPartitions,
    fetch_: PartitionFetch,
    params: ConsumerFetchParams,
    *,
    remaining: int,
    min_one_message: bool,
    rack: str = "",
) -> FetchPartitionData:
    """One partition's answer: its records up to its bound, or why there are none."""
    index = fetch_.index
    if fetch_.tp is None:
        return FetchPartitionData(index, int(fetch_.error), records=b"")
    try:
        partition = hosted.readable_partition(
            fetch_.tp, fetch_.current_leader_epoch, allow_follower=params.allow_follower
        )
    except KafkaError as exc:
        return _refused(hosted, fetch_.tp, index, exc.code, params)
    log = partition.log
    high_watermark = log.high_watermark
    last_stable_offset = log.last_stable_offset
    upper = last_stable_offset if params.isolation_level == READ_COMMITTED else high_watermark
    data = FetchPartitionData(
        index,
        0,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=log.log_start_offset,
        aborted_transactions=[] if params.isolation_level == READ_COMMITTED else None,
    )
    if rack and partition.is_leader:
        preferred = hosted.preferred_read_replica(partition, fetch_.fetch_offset, rack)
        if preferred >= 0:  # read there: nothing from here
            data.preferred_read_replica = preferred
            data.records = b""
            return data
    end = log.log_end_offset
    if upper <= fetch_.fetch_offset <= end or (
        # A consumer that names no leader epoch and reached a follower ahead of it (stale
        # metadata) gets nothing and retries, not OFFSET_OUT_OF_RANGE (as Kafka since 3.4).
        fetch_.fetch_offset > end and not partition.is_leader and fetch_.current_leader_epoch < 0
    ):
        data.records = b""
        return data
    try:
        read = log.read(
            fetch_.fetch_offset,
            max_bytes=max(min(fetch_.max_bytes, remaining), 0),
            max_offset=upper,
            min_one_message=min_one_message,
        )
    except KafkaError as exc:
        data.error_code = int(exc.code)
        data.records = b""
        return data
    data.records = list(read.regions)
    if params.isolation_level == READ_COMMITTED and data.records:
        read_to = getattr(read, "next_offset", None) or upper
        data.aborted_transactions = [
            (aborted.producer_id, aborted.first_offset)
            for aborted in log.aborted_transactions(fetch_.fetch_offset, read_to)
        ]
    return data


def _refused(
    hosted: HostedPartitions,
    tp: TopicPartition,
    index: int,
    code: int,
    params: ConsumerFetchParams,
) -> FetchPartitionData:
    """The answer of a partition this replica may not serve: an error with an empty record set
    (librdkafka 2.0 refuses a whole answer with a null one, and never applies
    auto.offset.reset), naming the current leader where a client should go (KIP-951)."""
    elsewhere = params.leader_of(tp)
    if code == ErrorCode.unknown_topic_or_partition and elsewhere is not None:
        code = ErrorCode.not_leader_or_follower  # it exists, on other brokers (as Kafka)
    data = FetchPartitionData(index, int(code), records=b"")
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
        current = hosted.get_partition(tp)
        if current is not None and current.leader_id >= 0:
            data.current_leader = (current.leader_id, current.leader_epoch)
        elif elsewhere is not None and elsewhere[0] >= 0:  # not a replica here
            data.current_leader = elsewhere
    return data


def _all_at_end(
    hosted: HostedPartitions, fetches: Sequence[PartitionFetch], params: ConsumerFetchParams
) -> bool:
    """True if every partition asked for is readable here (led, or followed when the version
    allows), fetched at its bound and so has nothing to return and no error: the common fetch
    on a busy broker, which parks at once without building the empty answer."""
    partitions = hosted.partitions
    for partition_fetch in fetches:
        tp = partition_fetch.tp
        partition = partitions.get(tp) if tp is not None else None
        if partition is None or not (partition.is_leader or params.allow_follower):
            return False
        epoch = partition_fetch.current_leader_epoch
        if epoch >= 0 and epoch != partition.leader_epoch:
            return False
        log = partition.log
        upper = upper_bound(log, params.isolation_level)
        if partition_fetch.fetch_offset != upper or upper > log.log_end_offset:
            return False
    return True


def _bytes_available(
    hosted: HostedPartitions, fetches: Sequence[PartitionFetch], params: ConsumerFetchParams
) -> int:
    """A lower bound of the bytes the fetch would return now. For min_bytes <= 1 (what most
    clients send) any new offset below the bound is enough, and nothing is read."""
    available = 0
    for partition_fetch in fetches:
        if partition_fetch.tp is None:
            continue
        partition = hosted.get_partition(partition_fetch.tp)
        if partition is None or partition.leader_id < 0:
            return ENOUGH
        if not (partition.is_leader or params.allow_follower):
            return ENOUGH
        log = partition.log
        upper = upper_bound(log, params.isolation_level)
        fetch_offset = partition_fetch.fetch_offset
        if upper > fetch_offset:
            if params.min_bytes <= 1:
                return 1
            try:
                read = log.read(
                    fetch_offset,
                    max_bytes=partition_fetch.max_bytes,
                    max_offset=upper,
                    min_one_message=True,
                )
            except KafkaError:
                return ENOUGH
            available += sum(region.length for region in read.regions)
        elif fetch_offset > log.log_end_offset or fetch_offset < log.log_start_offset:
            return ENOUGH
    return available


def records_size(records: object) -> int:
    """Bytes of an answer's records: bytes, or a list of file regions."""
    if records is None:
        return 0
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    assert isinstance(records, list)
    return sum(region.length for region in records)
