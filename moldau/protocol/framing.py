"""Size-prefixed framing of the Kafka protocol, without I/O.

Every request and response is `int32 size | size bytes`. `FrameDecoder.feed()` takes whatever a
socket read returned and yields complete frames. The size is checked before anything is kept,
so a hostile prefix cannot make the broker reserve memory (a Kafka CVE); a frame's body is kept
as the reads that carried it and joined once when complete, so memory follows the bytes that
really arrived.

Copies: a frame that arrived within one read is a slice of that read (with `views=True` a
read-only memoryview, no copy at all); a frame spread over several reads is joined once.
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
    """Accumulates reads and yields frames without their size prefix.

    Frames are `bytes`, or with `views=True` read-only memoryviews over the reads (which stay
    alive as long as the frame does): what the broker's hot path wants, since kio decodes from
    any read-only buffer.
    """

    def __init__(self, max_frame_size: int, *, views: bool = False) -> None:
        self.max_frame_size = max_frame_size
        self._views = views
        self._prefix = bytearray()  # a size prefix split across reads
        self._parts: list[memoryview] = []  # the body read so far of the frame being collected
        self._missing = -1  # bytes still missing from that body; -1 when reading a prefix

    @property
    def buffered(self) -> int:
        return len(self._prefix) + sum(len(part) for part in self._parts)

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[bytes | memoryview]:
        view = memoryview(data)
        if not view.readonly:  # the caller may reuse its buffer: keep our own copy
            view = memoryview(bytes(view))
        while True:
            if self._missing >= 0:  # collecting a body that spans reads
                take = min(self._missing, len(view))
                if take:
                    self._parts.append(view[:take])
                    view = view[take:]
                    self._missing -= take
                if self._missing:
                    return
                parts, self._parts, self._missing = self._parts, [], -1
                yield self._frame(parts[0] if len(parts) == 1 else memoryview(b"".join(parts)))
                continue
            if not view:
                return
            if self._prefix or len(view) < 4:
                take = min(4 - len(self._prefix), len(view))
                self._prefix += view[:take]
                view = view[take:]
                if len(self._prefix) < 4:
                    return
                (size,) = _SIZE.unpack(self._prefix)
                self._prefix.clear()
            else:
                (size,) = _SIZE.unpack_from(view, 0)
                view = view[4:]
            if size < 0:
                raise InvalidFrameSize(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            if len(view) >= size:  # the whole body is in this read
                yield self._frame(view[:size])
                view = view[size:]
            else:
                self._missing = size

    def _frame(self, view: memoryview) -> bytes | memoryview:
        return view if self._views else bytes(view)
