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


def test_frames_are_handed_out_one_at_a_time_and_the_rest_is_kept() -> None:
    decoder = FrameDecoder(1024)
    decoder.receive(_frame(b"one") + _frame(b"two") + _frame(b"thr"))
    assert decoder.next_frame() == b"one"
    assert decoder.buffered == 14
    assert decoder.next_frame() == b"two"
    assert decoder.next_frame() == b"thr"
    assert decoder.next_frame() is None
    assert not decoder.in_frame


def test_a_trickled_body_costs_about_the_bytes_that_arrived() -> None:
    """A peer announcing 100 MB and sending a byte at a time: memory follows the bytes."""
    import tracemalloc

    decoder = FrameDecoder(200 * 1024 * 1024, views=True, reserve=lambda size: True)
    decoder.receive((100 * 1024 * 1024).to_bytes(4, "big"))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            decoder.receive(b"x")
            assert decoder.next_frame() is None
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 20_000
    assert grown < 2 * 20_000, f"{grown} bytes held for 20,000 bytes received"


def test_a_large_frame_waits_for_its_reservation() -> None:
    granted: list[int] = []
    allow = False

    def reserve(size: int) -> bool:
        if allow:
            granted.append(size)
        return allow

    decoder = FrameDecoder(1 << 20, reserve=reserve, small_frame_bytes=100)
    decoder.receive(_frame(b"s" * 50) + _frame(b"L" * 500))
    assert decoder.next_frame() == b"s" * 50  # small frames need no reservation
    assert decoder.next_frame() is None
    assert decoder.awaiting_memory and decoder.in_frame
    allow = True
    assert decoder.next_frame() == b"L" * 500
    assert granted == [500]
    assert not decoder.awaiting_memory and decoder.reserved == 0


def test_a_reservation_is_held_while_the_body_arrives() -> None:
    decoder = FrameDecoder(1 << 20, reserve=lambda size: True, small_frame_bytes=100)
    data = _frame(b"B" * 1000)
    decoder.receive(data[:300])
    assert decoder.next_frame() is None
    assert decoder.reserved == 1000
    decoder.receive(data[300:])
    assert decoder.next_frame() == b"B" * 1000
    assert decoder.reserved == 0
