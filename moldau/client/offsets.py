"""ListOffsets: partition offsets by timestamp spec, sent to each partition's leader.

Specs are Kafka's: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a timestamp in milliseconds
(the first offset whose timestamp is at or after it; -1 if there is none).

A partition whose leader moved or died (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a refused
connection, ...) is asked again after a metadata refresh, with backoff, until the timeout (the
request timeout by default), as Kafka's clients retry ListOffsets; the partitions already
answered are not asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from moldau.client.cluster import Cluster
from moldau.client.conversions import epoch_millis
from moldau.client.errors import ErrorCode, KafkaException, check_error
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "ListOffsetsResult", "list_offsets"]

LATEST: Final = -1
EARLIEST: Final = -2
MAX_TIMESTAMP: Final = -3
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    offset: int
    timestamp: int
    leader_epoch: int


# What a leader that moved or died answers; retried (an unknown topic is not: it fails at once).
_LEADER_MOVED: Final = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.offset_not_available,
        ErrorCode.kafka_storage_error,
    }
)


async def list_offsets(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: int = READ_UNCOMMITTED,
    timeout: float | None = None,
) -> dict[TopicPartition, ListOffsetsResult]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (cluster.config.request_timeout if timeout is None else timeout)
    backoff = cluster.config.get_int("retry.backoff.ms") / 1000
    most = cluster.config.get_int("retry.backoff.max.ms") / 1000
    results: dict[TopicPartition, ListOffsetsResult] = {}
    while True:
        pending = {tp: spec for tp, spec in specs.items() if tp not in results}
        try:
            await _ask_leaders(cluster, pending, results, isolation_level)
            return dict(sorted(results.items()))
        except KafkaException as exc:
            if exc.code not in _LEADER_MOVED or loop.time() + backoff >= deadline:
                raise
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, most)
        with contextlib.suppress(KafkaException):
            await cluster.refresh_metadata(sorted({tp.topic for tp in pending}))


async def _ask_leaders(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    results: dict[TopicPartition, ListOffsetsResult],
    isolation_level: int,
) -> None:
    """One ListOffsets per leader; each answer lands in `results` as it comes."""
    by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
    for tp, spec in specs.items():
        connection = await cluster.leader_connection(tp.topic, tp.partition)
        by_leader[connection.node_id][tp] = spec
    for node_id, items in by_leader.items():
        connection = await cluster.connection(node_id)
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, spec in items.items():
            topics[tp.topic].append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": spec}
            )
        response = await connection.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "timeout": 30000,
            },
        )
        failure: KafkaException | None = None
        for topic in response.topics:
            for partition in topic.partitions:
                tp = TopicPartition(topic.name, int(partition.partition_index))
                try:
                    check_error(partition.error_code, context=str(tp))
                except KafkaException as exc:
                    # (an error retrying cannot cure is the one to report)
                    if failure is None or failure.code in _LEADER_MOVED:
                        failure = exc
                    continue
                results[tp] = ListOffsetsResult(
                    offset=int(partition.offset),
                    timestamp=epoch_millis(partition.timestamp),
                    leader_epoch=int(getattr(partition, "leader_epoch", -1)),
                )
        if failure is not None:
            raise failure
