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


def test_views_are_read_only_and_reassemble_frames_split_across_reads() -> None:
    decoder = FrameDecoder(1 << 20, views=True)
    big = bytes(range(256)) * 1000
    data = _frame(b"a") + _frame(big) + _frame(b"") + _frame(b"tail")
    frames = []
    for start in range(0, len(data), 7000):
        frames.extend(decoder.feed(data[start : start + 7000]))
    assert [bytes(f) for f in frames] == [b"a", big, b"", b"tail"]
    assert all(isinstance(f, memoryview) and f.readonly for f in frames)
    assert decoder.buffered == 0


def test_a_partial_body_is_counted_as_buffered() -> None:
    decoder = FrameDecoder(1024)
    assert list(decoder.feed(_frame(b"x" * 100)[:50])) == []
    assert decoder.buffered == 46
    assert list(decoder.feed(_frame(b"x" * 100)[50:])) == [b"x" * 100]
    assert decoder.buffered == 0


def test_a_writable_input_buffer_is_copied_before_it_is_kept() -> None:
    decoder = FrameDecoder(1024, views=True)
    data = bytearray(_frame(b"hello"))
    (frame,) = decoder.feed(data)
    data[4:9] = b"XXXXX"
    assert bytes(frame) == b"hello"
