"""The cluster as a broker shows it to clients in Metadata and DescribeCluster: the live
brokers, each with its endpoint on the client's listener, and the controller to send metadata
changes to (any live broker passes them on to the active controller, KIP-590)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moldau.metadata.image import BrokerImage, MetadataImage
from moldau.metadata.records import BrokerEndpoint


def listed_brokers(
    image: MetadataImage,
    node_id: int,
    own_endpoints: Sequence[BrokerEndpoint],
    listener_name: str,
) -> list[dict[str, Any]]:
    """Live brokers with their endpoint on `listener_name`; this node's own are the ones it
    listens on now (its registration may be older: see QuorumController.start)."""
    brokers = []
    own = {endpoint.name: endpoint for endpoint in own_endpoints}
    for broker in image.live_brokers():
        endpoint: BrokerEndpoint | None
        if broker.broker_id == node_id and own:
            endpoint = own.get(listener_name) or next(iter(own.values()))
        else:
            endpoint = endpoint_on(broker, listener_name)
        if endpoint is None:
            continue
        brokers.append(
            {
                "node_id": broker.broker_id,
                "host": endpoint.host,
                "port": endpoint.port,
                "rack": broker.rack,
            }
        )
    return brokers


def endpoint_on(broker: BrokerImage, listener_name: str) -> BrokerEndpoint | None:
    """`broker`'s endpoint on `listener_name`, else its first (a client on a listener the broker
    lacks still learns where it is)."""
    return broker.endpoint(listener_name) or (broker.endpoints[0] if broker.endpoints else None)


def controller_for_clients(node_id: int, live: Sequence[int]) -> int:
    """The controller a broker names, given the live brokers by id: itself while its image lists
    it live, else the live broker of lowest id, else -1 (Kafka names a random live broker). It
    is always one the same answer lists: librdkafka's admin client waits, until its next
    metadata refresh, for a controller the list lacks. Naming the quorum's leader instead would
    strand clients that keep their metadata when that node dies."""
    if node_id in live:
        return node_id
    return min(live) if live else -1
