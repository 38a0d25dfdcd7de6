"""ListOffsets: partition offsets by timestamp spec, sent to each partition's leader.

Specs are Kafka's: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a timestamp in milliseconds
(the first offset whose timestamp is at or after it; -1 if there is none).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from moldau.client.cluster import Cluster
from moldau.client.conversions import epoch_millis
from moldau.client.errors import check_error
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


async def list_offsets(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict[TopicPartition, ListOffsetsResult]:
    by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
    for tp, spec in specs.items():
        connection = await cluster.leader_connection(tp.topic, tp.partition)
        by_leader[connection.node_id][tp] = spec
    results: dict[TopicPartition, ListOffsetsResult] = {}
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
        for topic in response.topics:
            for partition in topic.partitions:
                tp = TopicPartition(topic.name, int(partition.partition_index))
                check_error(partition.error_code, context=str(tp))
                results[tp] = ListOffsetsResult(
                    offset=int(partition.offset),
                    timestamp=epoch_millis(partition.timestamp),
                    leader_epoch=int(getattr(partition, "leader_epoch", -1)),
                )
    return dict(sorted(results.items()))
