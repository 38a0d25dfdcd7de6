"""Listeners bind and listen at once: a port another listener holds fails the start, under
asyncio's loop and uvloop's alike (with a socket bound but not yet listening, uvloop let a
second process bind the same port and both served it, sharing its connections)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from moldau.config.cluster import ListenerAddress
from moldau.net.listener import Listener

LOOPS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


def listener(port: int) -> Listener:
    return Listener(
        ListenerAddress("PLAINTEXT", "127.0.0.1", port),
        lambda frame, info: None,
        security_protocol="PLAINTEXT",
        max_frame_size=1 << 20,
    )


@pytest.mark.parametrize("loop", LOOPS)
def test_a_port_in_use_fails_the_start_before_either_serves(loop: str) -> None:
    async def scenario() -> None:
        first = listener(0)
        await first.start()  # bound and listening, not yet accepting
        try:
            with pytest.raises(OSError, match="address already in use"):
                await listener(first.bound_port).start()
            connected = socket.create_connection(("127.0.0.1", first.bound_port), timeout=5)
            connected.close()  # the kernel takes it into the backlog before the node serves
        finally:
            await first.close()
        again = listener(first.bound_port)  # and the port is free again once closed
        await again.start()
        await again.close()

    LOOPS[loop](scenario())
