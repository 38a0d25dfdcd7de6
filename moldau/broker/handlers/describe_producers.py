"""DescribeProducers (key 61), v0: the active producers of partitions (KIP-664).

For each partition with a replica here, leader or follower (as Kafka answers it, so
`kafka-transactions find-hanging --broker-id N` can ask any broker about the replicas it
hosts): every producer id in the replica's producer state with its epoch, last sequence and
timestamp, coordinator epoch and the first offset of its open transaction (-1 when none), so a
hanging transaction can be found. A partition hosted elsewhere answers NOT_LEADER_OR_FOLLOWER,
one that does not exist UNKNOWN_TOPIC_OR_PARTITION. A topic the principal may not READ answers
TOPIC_AUTHORIZATION_FAILED for its partitions, whether or not it exists, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition


@handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
def handle_describe_producers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    replica_manager = ctx.node.replica_manager
    image = ctx.node.metadata_image
    topics = []
    for topic in request.topics:
        may_read = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            answer: dict[str, Any] = {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "error_message": None,
                "active_producers": [],
            }
            try:
                if not may_read:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = replica_manager.hosted_partition(TopicPartition(topic.name, index))
            except KafkaError as error:
                answer["error_code"] = error.code
                known = image.topics.get(topic.name)
                if error.code == ErrorCode.unknown_topic_or_partition and (
                    known is not None and index in known.partitions
                ):  # it exists, on other brokers
                    answer["error_code"] = ErrorCode.not_leader_or_follower
                partitions.append(answer)
                continue
            for entry in partition.log.producer_state.producers.values():
                answer["active_producers"].append(
                    {
                        "producer_id": entry.producer_id,
                        "producer_epoch": entry.producer_epoch,
                        "last_sequence": entry.last_sequence,
                        "last_timestamp": entry.last_timestamp,
                        "coordinator_epoch": entry.coordinator_epoch,
                        "current_txn_start_offset": entry.current_txn_first_offset,
                    }
                )
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
