"""ListPartitionReassignments (key 46), v0: partitions with a reassignment in progress (KIP-455).

v0 is flexible. `topics` null lists every reassigning partition; otherwise only the named
partitions that are reassigning (unknown ones are left out, as Kafka does). A broker passes the
request on to the active controller, as Kafka's do, so the list is the committed state: a
reassignment answered as started or cancelled shows so at once, whichever broker is asked.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.metadata.acls import AclOperation
from moldau.metadata.image import PartitionImage
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, forward=True)
def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.DESCRIBE)
    image = ctx.node.metadata_image
    wanted: dict[str, set[int] | None]
    if request.topics is None:
        wanted = dict.fromkeys(sorted(image.topics))
    else:
        wanted = {t.name: set(t.partition_indexes) for t in request.topics}
    topics = []
    for name, indexes in wanted.items():
        topic = image.topics.get(name)
        if topic is None:
            continue
        partitions = [
            _ongoing(partition)
            for index, partition in sorted(topic.partitions.items())
            if (indexes is None or index in indexes)
            and (partition.adding_replicas or partition.removing_replicas)
        ]
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": topics,
    }


def _ongoing(partition: PartitionImage) -> dict[str, Any]:
    return {
        "partition_index": partition.partition,
        "replicas": list(partition.replicas),
        "adding_replicas": list(partition.adding_replicas),
        "removing_replicas": list(partition.removing_replicas),
    }
