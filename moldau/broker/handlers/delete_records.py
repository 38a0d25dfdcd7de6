"""DeleteRecords (key 21), v0-2: advance a partition's log start offset (the low watermark).

v1 is v0 (throttling change); v2 is flexible. An offset of -1 means the high watermark. An
offset past the high watermark is OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.DELETE_RECORDS, 0, 2)
def handle_delete_records(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        for requested in topic.partitions:
            response: dict[str, Any] = {
                "partition_index": requested.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.none,
            }
            try:
                tp = TopicPartition(topic.name, requested.partition_index)
                ctx.node.authorize_delete(ctx, tp)
                partition = replica_manager.leader_partition(tp)
                log = partition.log
                offset = log.high_watermark if requested.offset == -1 else requested.offset
                if offset < 0 or offset > log.high_watermark:
                    raise KafkaError(ErrorCode.offset_out_of_range)
                log.delete_records(offset)
                response["low_watermark"] = log.log_start_offset
            except KafkaError as exc:
                response["error_code"] = exc.code
            partitions.append(response)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
