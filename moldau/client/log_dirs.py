"""A broker's log dirs: DescribeLogDirs and AlterReplicaLogDirs (KIP-113), as Kafka's Admin
`describeLogDirs` / `describeReplicaLogDirs` / `alterReplicaLogDirs` send them: each to the
broker concerned, never forwarded. `LogDirDescription`, `ReplicaInfo` and `ReplicaLogDirInfo` are
Kafka's classes of the same names; a replica being moved between two dirs of a broker is listed in
both, in its target with `is_future`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from moldau.client.cluster import Cluster
from moldau.client.errors import ErrorCode, KafkaException, check_error, error_code_of
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = [
    "LogDirDescription",
    "ReplicaInfo",
    "ReplicaLogDirInfo",
    "TopicPartitionReplica",
    "alter_replica_log_dirs",
    "describe_log_dirs",
    "describe_replica_log_dirs",
    "replica_log_dirs",
]


class TopicPartitionReplica(NamedTuple):
    """The replica of a partition on one broker (Kafka's `TopicPartitionReplica`)."""

    topic: str
    partition: int
    broker_id: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} on broker {self.broker_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaInfo:
    """A replica in a log dir: its size in bytes, how many offsets it is behind (the high
    watermark for a current replica, the copy for a future one), and whether it is the future
    replica of a move between log dirs."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDirDescription:
    """One log dir of a broker: its error (None when online), its replicas, and its capacity
    (None when the broker does not say: DescribeLogDirs before v4)."""

    error: KafkaException | None
    replicas: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLogDirInfo:
    """Where a replica is on its broker: its log dir (None when no live log dir holds it) and,
    while it is being moved, the log dir of its future replica."""

    current_log_dir: str | None = None
    current_offset_lag: int = 0
    future_log_dir: str | None = None
    future_offset_lag: int = 0


def replica_log_dirs(
    broker_id: int, partitions: Iterable[TopicPartition], dirs: Mapping[str, LogDirDescription]
) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
    """The replicas of `partitions` on a broker, from its log dirs as DescribeLogDirs lists them
    (Kafka's `describeReplicaLogDirs`)."""
    found: dict[TopicPartitionReplica, ReplicaLogDirInfo] = {}
    for tp in partitions:
        info = ReplicaLogDirInfo()
        for path, description in dirs.items():
            replica = description.replicas.get(tp)
            if replica is None:
                continue
            if replica.is_future:
                info = replace(info, future_log_dir=path, future_offset_lag=replica.offset_lag)
            else:
                info = replace(info, current_log_dir=path, current_offset_lag=replica.offset_lag)
        found[TopicPartitionReplica(tp.topic, tp.partition, broker_id)] = info
    return found


def _topics_filter(partitions: Iterable[TopicPartition] | None) -> list[dict[str, Any]] | None:
    if partitions is None:
        return None
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [{"topic": topic, "partitions": sorted(p)} for topic, p in sorted(by_topic.items())]


def _bytes(result: Any, name: str) -> int | None:
    value = getattr(result, name, None)
    return None if value is None or int(value) < 0 else int(value)


async def describe_log_dirs(
    cluster: Cluster,
    broker_ids: Iterable[int],
    partitions: Iterable[TopicPartition] | None = None,
) -> dict[int, dict[str, LogDirDescription]]:
    """Each broker's log dirs (absolute paths) with their replicas, all of them or only those
    of `partitions`. An unreachable broker or a request-level error raises KafkaException."""
    topics = _topics_filter(partitions)
    described: dict[int, dict[str, LogDirDescription]] = {}
    for broker_id in broker_ids:
        connection = await cluster.connection(broker_id)
        response = await connection.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": topics})
        check_error(
            getattr(response, "error_code", 0), context=f"DescribeLogDirs on broker {broker_id}"
        )
        dirs: dict[str, LogDirDescription] = {}
        for result in response.results:
            code = error_code_of(result.error_code)
            dirs[result.log_dir] = LogDirDescription(
                error=None if code is ErrorCode.none else KafkaException(code, result.log_dir),
                replicas={
                    TopicPartition(topic.name, int(p.partition_index)): ReplicaInfo(
                        size=int(p.partition_size),
                        offset_lag=int(p.offset_lag),
                        is_future=bool(p.is_future_key),
                    )
                    for topic in result.topics
                    for p in topic.partitions
                },
                total_bytes=_bytes(result, "total_bytes"),
                usable_bytes=_bytes(result, "usable_bytes"),
            )
        described[broker_id] = dirs
    return described


async def describe_replica_log_dirs(
    cluster: Cluster, replicas: Iterable[TopicPartitionReplica]
) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
    """The log dir of each replica, and of its future replica while it moves."""
    by_broker: dict[int, list[TopicPartition]] = defaultdict(list)
    for replica in replicas:
        by_broker[replica.broker_id].append(replica.topic_partition)
    found: dict[TopicPartitionReplica, ReplicaLogDirInfo] = {}
    for broker_id, partitions in by_broker.items():
        described = await describe_log_dirs(cluster, [broker_id], partitions)
        found.update(replica_log_dirs(broker_id, partitions, described[broker_id]))
    return found


async def alter_replica_log_dirs(
    cluster: Cluster, assignments: Mapping[TopicPartitionReplica, str]
) -> dict[TopicPartitionReplica, KafkaException | None]:
    """Ask each broker to move its replicas to the given log dirs (absolute paths). Returns each
    replica's outcome: None when the move started (or the replica is there already), else the
    broker's error: LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, or REPLICA_NOT_AVAILABLE when the
    broker has no replica yet (it remembers the dir for when the replica is created; Kafka's
    tool asks again until the replica exists)."""
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for replica, path in assignments.items():
        by_broker[replica.broker_id][path][replica.topic].append(replica.partition)
    outcomes: dict[TopicPartitionReplica, KafkaException | None] = {}
    for broker_id, dirs in by_broker.items():
        connection = await cluster.connection(broker_id)
        response = await connection.request(
            ApiKey.ALTER_REPLICA_LOG_DIRS,
            {
                "dirs": [
                    {
                        "path": path,
                        "topics": [
                            {"name": topic, "partitions": partitions}
                            for topic, partitions in topics.items()
                        ],
                    }
                    for path, topics in dirs.items()
                ]
            },
        )
        for result in response.results:
            for partition in result.partitions:
                replica = TopicPartitionReplica(
                    result.topic_name, int(partition.partition_index), broker_id
                )
                try:
                    check_error(
                        partition.error_code,
                        f"log dir {assignments.get(replica)}",
                        context=str(replica),
                    )
                except KafkaException as exc:
                    outcomes[replica] = exc
                else:
                    outcomes[replica] = None
    return outcomes
