"""Size-prefixed framing of the Kafka protocol, without I/O.

Every request and response is `int32 size | size bytes`. `FrameDecoder.receive()` keeps what a
socket read returned; `next_frame()` hands out one complete frame at a time, so the caller decides
how many frames it takes per turn and can stop (holding the rest) when its limits are reached.
`feed()` does both for callers that take every frame at once.

Memory follows the bytes that really arrived, never the size a peer announces: the size is checked
before anything is kept (a Kafka CVE), a body that spans reads is collected in one growing
bytearray (a trickle of one-byte reads costs one byte each, not an object each), and a frame of
more than `small_frame_bytes` must first get a reservation of its whole size from the caller's
`reserve` function (Kafka's memory pool). When the reservation is refused, `next_frame()` returns
None with `awaiting_memory` set, keeping the size, until the caller retries.

Copies: a frame that arrived within one read is a slice of that read (with `views=True` a
read-only memoryview, no copy at all); a frame spread over several reads is copied once, into its
bytearray, as it arrives.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Iterator

_SIZE = struct.Struct(">i")


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrameSize(ValueError):
    pass


Frame = bytes | memoryview


class FrameDecoder:
    """Accumulates reads and hands out frames without their size prefix.

    Frames are `bytes`, or with `views=True` read-only memoryviews (over the read that carried
    them, or over the bytearray that collected them): what the broker's hot path wants, since
    kio decodes from any buffer.
    """

    def __init__(
        self,
        max_frame_size: int,
        *,
        views: bool = False,
        reserve: Callable[[int], bool] | None = None,
        small_frame_bytes: int = 64 * 1024,
    ) -> None:
        self.max_frame_size = max_frame_size
        self._views = views
        self._reserve = reserve
        self._small_frame_bytes = small_frame_bytes
        self._reads: collections.deque[memoryview] = collections.deque()  # not yet parsed
        self._unparsed = 0  # bytes in _reads
        self._size = -1  # size of the frame being collected; -1 while reading a prefix
        self._body: bytearray | None = None  # the body so far, when it spans reads
        self.awaiting_memory = False
        self.reserved = 0  # bytes reserved for the frame being collected (not yet handed out)

    @property
    def buffered(self) -> int:
        """Bytes held: unparsed reads and the partial body."""
        return self._unparsed + (len(self._body) if self._body is not None else 0)

    @property
    def frame_size(self) -> int:
        """The size of the frame being collected, once its prefix has arrived (else 0)."""
        return max(self._size, 0)

    @property
    def in_frame(self) -> bool:
        """True while part of a frame (its size prefix or body) has arrived and not all of it."""
        return self._size >= 0 or self._unparsed > 0

    def receive(self, data: bytes | bytearray | memoryview) -> None:
        """Keep one read; frames are taken out with `next_frame()`."""
        if not data:
            return
        view = memoryview(data)
        if not view.readonly:  # the caller may reuse its buffer: keep our own copy
            view = memoryview(bytes(view))
        self._reads.append(view)
        self._unparsed += len(view)

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None until more bytes (or memory) arrive.

        Raises FrameTooLarge or InvalidFrameSize for a size prefix that cannot be served."""
        if self._size < 0:
            if self._unparsed < 4:
                return None
            size = _SIZE.unpack(self._take(4))[0]
            if size < 0:
                raise InvalidFrameSize(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            self._size = size
        if self.reserved < self._size and self._size > self._small_frame_bytes:
            if self._reserve is not None and not self._reserve(self._size):
                self.awaiting_memory = True
                return None
            self.reserved = self._size
        self.awaiting_memory = False
        size = self._size
        if self._body is None:
            if self._reads and len(self._reads[0]) >= size:  # the whole body is in one read
                return self._finish(self._take(size))
            self._body = bytearray()
        body = self._body
        while self._reads and len(body) < size:
            body += self._take(min(size - len(body), len(self._reads[0])))
        if len(body) < size:
            return None
        self._body = None
        return self._finish(memoryview(body).toreadonly() if self._views else bytes(body))

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[Frame]:
        """`receive(data)`, then every complete frame (for callers without flow control)."""
        self.receive(data)
        while (frame := self.next_frame()) is not None:
            yield frame

    def _take(self, count: int) -> memoryview:
        """`count` bytes from the unparsed reads (a slice when one read holds them)."""
        first = self._reads[0]
        self._unparsed -= count
        if len(first) > count:
            self._reads[0] = first[count:]
            return first[:count]
        if len(first) == count:
            self._reads.popleft()
            return first
        parts = []
        while count:
            piece = self._reads[0]
            if len(piece) > count:
                parts.append(piece[:count])
                self._reads[0] = piece[count:]
                count = 0
            else:
                parts.append(piece)
                self._reads.popleft()
                count -= len(piece)
        return memoryview(b"".join(parts))

    def _finish(self, view: memoryview | bytes) -> Frame:
        self._size = -1
        self.reserved = 0
        if self._views:
            return view if isinstance(view, memoryview) else memoryview(view)
        return bytes(view)
