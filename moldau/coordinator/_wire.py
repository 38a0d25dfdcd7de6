"""Primitive encoders for the `__consumer_offsets` record layouts.

Keys and the classic values (OffsetCommitValue v3, GroupMetadataValue v3) use the fixed-width
encodings (int16-length strings, int32-length bytes and arrays); the KIP-848 values are "flexible"
(unsigned-varint lengths plus one, and a tagged-field section). Tagged fields are skipped on read.
"""

from __future__ import annotations

import struct
import uuid

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not match the layout its version announces."""


class Writer:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int8(self, value: int) -> Writer:
        self._parts.append(_INT8.pack(value))
        return self

    def int16(self, value: int) -> Writer:
        self._parts.append(_INT16.pack(value))
        return self

    def int32(self, value: int) -> Writer:
        self._parts.append(_INT32.pack(value))
        return self

    def int64(self, value: int) -> Writer:
        self._parts.append(_INT64.pack(value))
        return self

    def uvarint(self, value: int) -> Writer:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._parts.append(bytes(out))
        return self

    def uuid(self, value: uuid.UUID) -> Writer:
        self._parts.append(value.bytes)
        return self

    def string(self, value: str | None) -> Writer:
        if value is None:
            return self.int16(-1)
        data = value.encode()
        self.int16(len(data))
        self._parts.append(data)
        return self

    def bytes_(self, value: bytes | None) -> Writer:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self._parts.append(value)
        return self

    def compact_string(self, value: str | None) -> Writer:
        if value is None:
            return self.uvarint(0)
        data = value.encode()
        self.uvarint(len(data) + 1)
        self._parts.append(data)
        return self

    def compact_array_length(self, length: int) -> Writer:
        return self.uvarint(length + 1)

    def no_tagged_fields(self) -> Writer:
        return self.uvarint(0)

    def build(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._position = 0

    def _take(self, size: int) -> memoryview:
        if size < 0 or self._position + size > len(self._data):
            raise RecordFormatError("record is shorter than its layout")
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return chunk

    def int8(self) -> int:
        value: int = _INT8.unpack(self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self._take(8))[0]
        return value

    def uvarint(self) -> int:
        result = 0
        shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint is too long")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise RecordFormatError("null where a string is required")
        return bytes(self._take(length)).decode()

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        return bytes(self._take(length)).decode()

    def bytes_(self) -> bytes:
        length = self.int32()
        if length < 0:
            return b""
        return bytes(self._take(length))

    def compact_nullable_string(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        return bytes(self._take(length)).decode()

    def compact_string(self) -> str:
        return self.compact_nullable_string() or ""

    def compact_array_length(self) -> int:
        return max(self.uvarint() - 1, 0)

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())
