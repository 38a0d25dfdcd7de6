"""Wiring of share groups' partition side into a broker (`moldau.share`): the
`SharePartitionManager` over this node's replica manager, told of every metadata change (a
share-partition whose leadership moved away is dropped; one led in a new leader epoch releases
its acquisitions) and stopped with the node. The coordinator side (membership, assignments)
is the group coordinator's (`moldau.coordinator.share`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moldau.broker.handlers._share import leader_in
from moldau.share.manager import SharePartitionManager
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices


def start(node: BrokerServices) -> SharePartitionManager:
    def leader_of(tp: TopicPartition) -> tuple[int, int] | None:
        return leader_in(node.metadata_image, tp)

    manager = SharePartitionManager(
        node.replica_manager, config=node.share_group_config, clock=node.clock, leader_of=leader_of
    )

    def follow(_previous: Any, _image: Any) -> None:
        manager.follow_leadership()

    node.share_partitions = manager
    node.metadata_listeners.append(follow)
    node.on_stop(manager.stop)
    return manager
