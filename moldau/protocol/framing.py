"""Size-prefixed framing of the Kafka protocol, without I/O.

Every request and response is `int32 size | size bytes`. `FrameDecoder.feed()` takes whatever a
socket read returned and yields complete frames. The size is checked before anything is
allocated, so a hostile prefix cannot make the broker reserve memory (a Kafka CVE).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_SIZE = struct.Struct(">i")


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrameSize(ValueError):
    pass


class FrameDecoder:
    """Accumulates bytes and yields frames (without their size prefix) as memoryviews."""

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[bytes]:
        buffer = self._buffer
        buffer += data
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0:
                raise InvalidFrameSize(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            if end - start - 4 < size:
                break
            yield bytes(buffer[start + 4 : start + 4 + size])
            start += 4 + size
        if start:
            del buffer[:start]
