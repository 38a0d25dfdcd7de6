"""KIP-951: an answer that sends a client to another leader carries that leader's endpoint on
the client's listener, so the client skips a metadata round trip (Produce and Fetch)."""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext


def node_endpoints(ctx: RequestContext, node_ids: set[int]) -> list[dict[str, Any]]:
    """Each broker of `node_ids` with its endpoint on the request's listener."""
    return [
        broker
        for broker in ctx.node.broker_endpoints(ctx.listener_name)
        if broker["node_id"] in node_ids
    ]
