from __future__ import annotations

import pytest

from moldau.protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrameSize


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def test_frames_split_across_reads_are_reassembled() -> None:
    decoder = FrameDecoder(1024)
    data = _frame(b"hello") + _frame(b"") + _frame(b"world!")
    frames: list[bytes] = []
    for i in range(len(data)):
        frames.extend(decoder.feed(data[i : i + 1]))
    assert frames == [b"hello", b"", b"world!"]
    assert decoder.buffered == 0


def test_oversized_frame_is_refused_before_allocation() -> None:
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLarge):
        list(decoder.feed((2**31 - 1).to_bytes(4, "big")))


def test_negative_size_is_refused() -> None:
    decoder = FrameDecoder(100)
    with pytest.raises(InvalidFrameSize):
        list(decoder.feed(b"\xff\xff\xff\xfe"))
