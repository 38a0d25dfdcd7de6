"""Hands out producer ids from blocks the controller allocates (Kafka's RPCProducerIdManager).

Ids come in blocks of 1000 committed to the metadata log, so an id is never given twice, even
across restarts; a block is fetched when the current one runs out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class ProducerIdManager:
    def __init__(self, allocate: Callable[[], Awaitable[Any]], node_id: int) -> None:
        """`allocate()` returns the next `ProducerIdsBlock` for this broker (the active
        controller's AllocateProducerIds)."""
        self._allocate = allocate
        self._node_id = node_id
        self._next = 0
        self._last = -1
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        if self._next > self._last:
            async with self._lock:
                if self._next > self._last:
                    block = await self._allocate()
                    self._next = block.first_producer_id
                    self._last = block.last_producer_id
        producer_id = self._next
        self._next += 1
        return producer_id
