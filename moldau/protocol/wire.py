"""Primitives of the hand-written response encoders (`produce_response`, `fetch_response`).

Flexible versions (KIP-482) write lengths as unsigned varints and end structures with tagged
fields: a count, then per field its tag, its size and its bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final


def uvarint(value: int) -> bytes:
    """An unsigned varint: 7 bits a byte, low bits first, the high bit set on all but the last."""
    if 0 <= value < 0x80:  # lengths and counts of one byte: most of the calls
        return _ONE_BYTE[value]
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE: Final = tuple(bytes([value]) for value in range(0x80))


def tagged_fields(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: the count, then each (tag, payload) in ascending tag order."""
    out = bytearray(uvarint(len(fields)))
    for tag, payload in fields:
        out += uvarint(tag) + uvarint(len(payload)) + payload
    return bytes(out)
