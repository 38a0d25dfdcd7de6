"""The client's response reader: frames cut anywhere by the socket come out whole and in order."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from moldau.client.connection import _SCRATCH_BYTES, _ResponseReader


class _Connection:
    """What the reader calls back: the frames it hands out and the error it reports."""

    address = "127.0.0.1:9092"

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.error: Exception | None = None
        self._transport: Any = None

    def _dispatch(self, frame: bytes | memoryview) -> None:
        self.frames.append(bytes(frame))

    def _fail_all(self, error: Exception) -> None:
        self.error = error


def _framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _deliver(reader: _ResponseReader, data: bytes, cuts: random.Random) -> None:
    """Hand `data` to the reader as a socket would: into its buffers, in reads of random size."""
    position = 0
    while position < len(data):
        buffer = reader.get_buffer(-1)
        count = min(len(buffer), len(data) - position, cuts.randint(1, 600_000))
        buffer[:count] = data[position : position + count]
        reader.buffer_updated(count)
        position += count


@pytest.mark.parametrize("seed", range(20))
def test_frames_of_every_size_cut_anywhere_come_out_whole(seed: int) -> None:
    async def run() -> None:
        sizes = random.Random(seed)
        bodies = [
            sizes.randbytes(
                sizes.choice([0, 1, 7, 500, 70_000, _SCRATCH_BYTES // 2 + 1, 3_000_000])
            )
            for _ in range(40)
        ]
        connection = _Connection()
        reader = _ResponseReader(connection)  # type: ignore[arg-type]
        _deliver(reader, b"".join(_framed(body) for body in bodies), random.Random(seed + 1000))
        assert connection.error is None
        assert connection.frames == bodies

    asyncio.run(run())


def test_a_negative_or_oversized_frame_size_fails_the_connection() -> None:
    async def run() -> None:
        for size in (-1, 2**31 - 1):
            connection = _Connection()
            reader = _ResponseReader(connection)  # type: ignore[arg-type]
            _deliver(reader, size.to_bytes(4, "big", signed=True) + b"x" * 10, random.Random(0))
            assert connection.frames == []
            assert connection.error is not None
            assert "frame of" in str(connection.error)

    asyncio.run(run())
