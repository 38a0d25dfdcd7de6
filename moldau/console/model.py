"""What the console's pages show and what its forms ask for: plain frozen dataclasses, filled by
`views.py`, `browser.py` and `actions.py` from `moldau.client` answers, read by the templates.

A part of a page that the cluster would not answer (DescribeQuorum on a cluster without KRaft,
DescribeLogDirs refused by an ACL) is None with its reason in the matching `*_error` field, so
the rest of the page still shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.client.admin import ConfigEntry, GroupListing, MemberDescription
from moldau.client.cluster import BrokerInfo
from moldau.client.quorum import QuorumInfo
from moldau.console.lag import LagSample
from moldau.console.rendering import RecordFormat, Rendered
from moldau.console.validation import OffsetTarget

__all__ = [
    "BrowseRequest",
    "BrowseResult",
    "BrowsedMessage",
    "GroupDetail",
    "GroupListing",
    "Overview",
    "PartitionLag",
    "PartitionRow",
    "ProduceRequest",
    "Produced",
    "ResetRequest",
    "TopicDetail",
    "TopicRow",
    "TopicsView",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    quorum: QuorumInfo | None
    quorum_error: str | None
    topic_count: int
    partition_count: int
    under_replicated: int  # partitions whose ISR is smaller than their replica set
    offline: int  # partitions without a leader


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    internal: bool
    under_replicated: int
    size_bytes: int | None  # one replica of each partition (None: DescribeLogDirs unanswered)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicsView:
    topics: tuple[TopicRow, ...]
    sizes_error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRow:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    earliest: int | None
    latest: int | None
    size_bytes: int | None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDetail:
    name: str
    topic_id: str | None
    internal: bool
    partitions: tuple[PartitionRow, ...]
    offsets_error: str | None
    sizes_error: str | None
    configs: tuple[ConfigEntry, ...]
    configs_error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    log_end_offset: int | None
    member: MemberDescription | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end_offset is None:
            return None
        return max(self.log_end_offset - self.committed, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDetail:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberDescription, ...]
    partitions: tuple[PartitionLag, ...]
    offsets_error: str | None
    history: tuple[LagSample, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowseRequest:
    topic: str
    partition: int
    start: OffsetTarget  # earliest, latest (the last `limit`), an offset or a timestamp
    limit: int
    format: RecordFormat


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowsedMessage:
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: str
    key: Rendered
    value: Rendered
    headers: tuple[tuple[str, Rendered], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowseResult:
    request: BrowseRequest
    partitions: int
    log_start_offset: int
    high_watermark: int
    start_offset: int  # where the read began (-1: the timestamp is after the last record)
    messages: tuple[BrowsedMessage, ...]

    @property
    def next_offset(self) -> int | None:
        return self.messages[-1].offset + 1 if self.messages else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequest:
    topic: str
    partition: int | None  # None: the producer's partitioner
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Produced:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetRequest:
    group_id: str
    topic: str
    partition: int | None  # None: every partition of the topic
    target: OffsetTarget
