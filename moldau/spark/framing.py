"""The schema registry's wire format read column-wise from a binary column of Arrow.

    byte 0      magic byte 0
    bytes 1-4   the schema id, a big-endian int32
    the rest    the payload (Avro's binary encoding, a JSON document, ...)

`read_frames(values)` finds every record's schema id and where its payload lies with a few Arrow
compute calls over the whole column, no Python per record. `Payloads` are the spans of some of
those records over the column's one data buffer; decoders read them column-wise or, where they
must, as Python bytes one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.spark.arrow_varints import ZERO, int64_scalar

__all__ = ["HEADER_BYTES", "Frames", "Payloads", "frame_header", "read_frames"]

MAGIC_BYTE: Final = 0
HEADER_BYTES: Final = 5
_HEADER: Final = int64_scalar(HEADER_BYTES)
_INT64: Final = pa.int64()
_SHIFTS: Final = [int64_scalar(bits) for bits in (24, 16, 8, 0)]
_EMPTY: Final = pa.py_buffer(b"")


def frame_header(schema_id: int) -> bytes:
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")


@dataclass(frozen=True, slots=True)
class Payloads:
    """The payloads of some records: `data[starts[i]:ends[i]]`, in the column's order."""

    data: pa.Buffer
    starts: pa.Int64Array
    ends: pa.Int64Array

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, indices: pa.Array) -> Payloads:
        return Payloads(self.data, self.starts.take(indices), self.ends.take(indices))

    def as_bytes(self, data: bytes) -> list[bytes]:
        """Each payload as bytes, sliced from `data` (the buffer's bytes, copied once by the
        caller for all the groups of a batch)."""
        return [
            data[start:end]
            for start, end in zip(self.starts.to_pylist(), self.ends.to_pylist(), strict=True)
        ]


@dataclass(frozen=True)  # (no slots: `data_bytes` is cached in the instance)
class Frames:
    """What the header of each row of a binary column says: its schema id (null where the row
    is null or not framed) and where its payload lies."""

    values: pa.BinaryArray
    payloads: Payloads
    schema_ids: pa.Int64Array
    framed: pa.BooleanArray  # non-null rows with a magic byte 0 and an id
    unframed: pa.BooleanArray  # non-null rows without them

    @cached_property
    def data_bytes(self) -> bytes:
        return bytes(self.payloads.data.to_pybytes())


def read_frames(values: pa.Array) -> Frames:
    """The frames of a binary column (its chunks joined first)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    count = len(values)
    _validity, offsets_buffer, data = values.buffers()
    offsets = pa.Array.from_buffers(
        pa.int32(), count + 1, [None, offsets_buffer], offset=values.offset
    ).cast(_INT64)
    starts, ends = offsets.slice(0, count), offsets.slice(1, count)
    data = data if data is not None else _EMPTY
    present = pc.is_valid(values)
    long_enough = pc.greater_equal(pc.subtract(ends, starts), _HEADER)
    if data.size == 0:
        header_bytes = [pa.nulls(count, _INT64)] * HEADER_BYTES
    else:
        data_bytes = pa.Array.from_buffers(pa.uint8(), data.size, [None, data])
        last = int64_scalar(data.size - 1)
        header_bytes = [
            pc.take(data_bytes, pc.min_element_wise(pc.add(starts, int64_scalar(k)), last)).cast(
                _INT64
            )
            for k in range(HEADER_BYTES)
        ]
    magic = pc.equal(header_bytes[0], ZERO)
    framed = pc.fill_null(pc.and_(pc.and_(present, long_enough), magic), False)
    schema_ids = pc.shift_left(header_bytes[1], _SHIFTS[0])
    for byte, shift in zip(header_bytes[2:], _SHIFTS[1:], strict=True):
        schema_ids = pc.bit_wise_or(schema_ids, pc.shift_left(byte, shift))
    schema_ids = pc.if_else(framed, schema_ids, pa.scalar(None, _INT64))
    return Frames(
        values=values,
        payloads=Payloads(data, pc.add(starts, _HEADER), ends),
        schema_ids=schema_ids,
        framed=framed,
        unframed=pc.and_(present, pc.invert(framed)),
    )
