"""`/ready`: whether a node serves its clients now, and if not, why (one short line).

A node is ready once it has started and serves its listeners, and, as a broker of a larger
cluster, while it is registered with the controller, unfenced, and caught up with the metadata
log (its image holds everything its quorum member knows to be committed). A controller-only
node is ready while its quorum has a leader. Not ready: starting (the step it is in), shutting
down, or any of those conditions lost since (fenced after missed heartbeats, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["NodeState", "readiness"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """What readiness depends on, read from a node at one moment."""

    starting: str | None  # the step a node not serving yet is in (None: it serves)
    broker_in_cluster: bool  # a broker whose controller is elsewhere (registers, heartbeats)
    controller_only: bool
    registered: bool
    fenced: bool
    metadata_offset: int  # the last record in this node's image
    quorum_high_watermark: int  # what its quorum member knows to be committed
    quorum_leader: int | None

    @classmethod
    def of(cls, node: BrokerServices) -> NodeState:
        controller = node.controller
        lifecycle = node.lifecycle
        layout = node.layout
        fenced_in_image = False
        metadata_offset, high_watermark, leader = -1, 0, None
        if controller is not None:
            broker = controller.image.brokers.get(node.node_id)
            fenced_in_image = broker is None or broker.fenced
            metadata_offset = controller.metadata_offset
            high_watermark = controller.driver.node.high_watermark
            leader = controller.leader_id
        return cls(
            starting=node.starting,
            broker_in_cluster=layout.is_broker and not layout.standalone,
            controller_only=not layout.is_broker,
            registered=lifecycle is not None and lifecycle.broker_epoch >= 0,
            fenced=lifecycle is None or lifecycle.fenced or fenced_in_image,
            metadata_offset=metadata_offset,
            quorum_high_watermark=high_watermark,
            quorum_leader=leader,
        )


def readiness(state: NodeState) -> tuple[bool, str]:
    """(ready, the line `/ready` answers)."""
    if state.starting is not None:
        return False, state.starting
    if state.broker_in_cluster:
        if not state.registered:
            return False, "not registered with the controller"
        if state.fenced:
            return False, "fenced by the controller"
    if state.metadata_offset + 1 < state.quorum_high_watermark:
        return False, (
            f"catching up with the metadata log (at offset {state.metadata_offset} of "
            f"{state.quorum_high_watermark - 1})"
        )
    if state.controller_only and state.quorum_leader is None:
        return False, "the metadata quorum has no leader"
    return True, "ready"
