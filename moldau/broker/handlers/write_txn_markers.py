"""WriteTxnMarkers (key 27), v1-2: write COMMIT or ABORT markers of a transaction to partitions.

v1 is the first flexible version (Kafka 4 removed v0); v2 adds transaction_version (KIP-890).
What a broker does with markers is `moldau.broker.transaction_markers`: it appends those of the
partitions it leads and refuses the others (a coordinator sends each partition's to its leader).

The principal needs CLUSTER_ACTION on the cluster (a broker's), or ALTER (an admin aborting a
hanging transaction), as in Kafka: else every partition answers CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.broker.transaction_markers import write_markers
from moldau.coordinator.transaction_metadata import MarkerRequest
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.types import TopicPartition


@handler(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    allowed = ctx.authorized_cluster(AclOperation.ALTER) or ctx.authorized_cluster(
        AclOperation.CLUSTER_ACTION
    )
    answers = []
    for marker in request.markers:
        partitions = tuple(
            TopicPartition(topic.name, index)
            for topic in marker.topics
            for index in topic.partition_indexes
        )
        if not allowed:  # (this response has no top-level error code)
            codes = dict.fromkeys(partitions, int(ErrorCode.cluster_authorization_failed))
        else:
            codes = await write_markers(
                ctx.node,
                MarkerRequest(
                    transactional_id="",
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    committed=marker.transaction_result,
                    partitions=partitions,
                    transaction_version=getattr(marker, "transaction_version", 0),
                ),
                marker.coordinator_epoch,
                forward=False,  # (what this broker does not lead is refused, not sent on)
            )
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": codes[tp]}
            )
        answers.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            }
        )
    return {"markers": answers}
