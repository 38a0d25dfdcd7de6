"""Fuzz target: bytes from a socket, through framing, the request header, the shape check and
kio's decoder (what `Dispatcher.__call__` does before a handler runs).

Invariant: only `FrameTooLarge`, `InvalidFrameSize` (framing) and `MalformedRequest` (header
and body) escape; never another exception, never an abort of the process (kio's native decoder
aborts on lengths it trusts, which libFuzzer reports as a deadly signal). The same bytes cut into
other reads give the same frames.
"""

from __future__ import annotations

from moldau.protocol.adapter import decode_request, decode_request_header, request_schema
from moldau.protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrameSize
from moldau.protocol.shape import MalformedRequest

MAX_FRAME_SIZE = 1 << 20


def test_one_input(data: bytes) -> None:
    frames = _frames(data, read_size=len(data) or 1)
    if frames is not None and data:
        # Cut into reads of 1..16 bytes (chosen by the first byte): the same frames come out.
        assert _frames(data, read_size=data[0] % 16 + 1) == frames
    for frame in frames or ():
        decode_frame(frame)
    # The bytes after a size prefix, decoded as one frame whatever the prefix said: mutations of
    # the body reach the decoder although they rarely keep the prefix right.
    decode_frame(data[4:])


def _frames(data: bytes, *, read_size: int) -> list[bytes] | None:
    """Every frame the stream carries, read `read_size` bytes at a time; None when the stream
    breaks on a bad size prefix (the connection would be closed)."""
    decoder = FrameDecoder(MAX_FRAME_SIZE, views=True, small_frame_bytes=256, reserve=_reserve)
    frames = []
    try:
        for start in range(0, len(data), read_size):
            frames += [bytes(frame) for frame in decoder.feed(data[start : start + read_size])]
    except (FrameTooLarge, InvalidFrameSize):
        return None
    return frames


def _reserve(size: int) -> bool:
    return size <= 4096  # larger frames wait for memory that never comes: held, not handed out


def decode_frame(frame: bytes | memoryview) -> None:
    try:
        header = decode_request_header(frame)
        if request_schema(header.api_key, header.api_version) is None:
            return  # unknown API or version: the dispatcher closes before decoding
        decode_request(header, frame)
    except MalformedRequest:
        pass
