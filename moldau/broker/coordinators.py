"""Wiring of the group and transaction coordinators into a node (filled in as they land)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.broker.node import Node

log = logging.getLogger(__name__)


async def start(node: Node) -> None:
    """Start the coordinators this build has; a node without them still serves produce/fetch."""
    return None
