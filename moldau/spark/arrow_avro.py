"""Avro payloads decoded column-wise with Arrow compute: no Python per record, nor per field.

Avro's binary encoding has no field offsets: a record is its fields one after the other, each as
long as its value needs. But all records of one writer schema have the same fields in the same
order, so they can be walked together: a `_Cursor` holds, per record, where the next field
starts; reading a field reads it at every record's position at once and moves each position past
it. Varints are read byte by byte with `take`, masks and shifts (as many bytes as the longest
needs), floats assembled from their bytes and reinterpreted, strings and bytes gathered from
their spans into one binary array (`record_fields.gather`). A union of null and a type reads its
branch, then the type at the positions of the records whose branch is not null, and scatters the
values back. `resolve` then turns the writer's column into the reader's (Avro's schema
resolution on whole columns: fields matched by name or alias, defaults, promotions, enums).

Column-wise: records, null, boolean, int, long, float, double, string, bytes, enum, fixed,
dates and timestamps, and unions of null and one of those. Arrays, maps, decimals: `readable`
is False and fastavro reads such schemas. A malformed payload cannot derail the others: every
position is clamped to its own record, and a record is bad when its fields do not end exactly
where it does, a varint runs past ten bytes, a length is negative, a branch or an enum index is
out of range. Bytes that are not UTF-8 where a string belongs make the whole group go to
fastavro, which finds the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from moldau.protocol.errors import KafkaError
from moldau.spark.arrow_varints import (
    ONE,
    ZERO,
    int64_scalar,
    interleave,
    repeated,
    row_numbers,
)
from moldau.spark.avro_types import AvroField, AvroType, arrow_type
from moldau.spark.framing import Payloads
from moldau.spark.record_fields import gather

__all__ = ["ColumnWiseDecoding", "readable", "resolvable", "resolve"]

_INT64: Final = pa.int64()
_UINT64: Final = pa.uint64()
_MAX_VARINT_BYTES: Final = 10
_OFFSETS: Final = [int64_scalar(k) for k in range(_MAX_VARINT_BYTES)]
_LOW_BITS: Final = pa.scalar(0x7F, _UINT64)
_HIGH_BIT: Final = pa.scalar(0x80, _UINT64)
_BYTE_SHIFTS: Final = [pa.scalar(8 * k, _UINT64) for k in range(8)]
_VARINT_SHIFTS: Final = [pa.scalar(7 * k, pa.uint64()) for k in range(_MAX_VARINT_BYTES)]
_UINT64_ONE: Final = pa.scalar(1, _UINT64)
_INT32_MIN: Final = int64_scalar(-(2**31))
_INT32_MAX: Final = int64_scalar(2**31 - 1)
_TRUE: Final = pa.scalar(True)
_COLUMN_WISE_KINDS: Final = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string", "enum", "fixed"}
)
_PROMOTIONS: Final = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class _NotColumnWise(Exception):
    """This group is better read by fastavro (bytes that are not UTF-8 where a string is)."""


def readable(avro: AvroType) -> bool:
    """Whether records of this writer schema can be read column-wise."""
    if avro.logical == "decimal":
        return False
    if avro.kind == "record":
        return all(readable(field.type) for field in avro.fields)
    return avro.kind in _COLUMN_WISE_KINDS


def resolvable(writer: AvroType, reader: AvroType) -> bool:
    """Whether `resolve` turns the writer's column into the reader's (the registry has already
    checked that the reader can read the writer; this says whether it can be done on columns)."""
    if writer.nullable and not reader.nullable:
        return False  # a null is a resolution error per record: fastavro says which
    if reader.kind == "record":
        if writer.kind != "record":
            return False
        by_name = {field.name: field for field in writer.fields}
        for field in reader.fields:
            found = _writer_field(field, by_name)
            if found is None:
                if not field.has_default or _default_column(field, 1) is None:
                    return False
            elif not resolvable(found.type, field.type):
                return False
        return True
    if reader.kind == writer.kind:
        return reader.kind != "fixed" or reader.size == writer.size
    return reader.kind in _PROMOTIONS.get(writer.kind, ())


def resolve(values: pa.Array, writer: AvroType, reader: AvroType) -> pa.Array:
    """The writer's column as the reader's (`resolvable(writer, reader)` must hold)."""
    target = arrow_type(reader)
    if reader.kind == "record":
        by_name = {field.name: field for field in writer.fields}
        children = []
        for field in reader.fields:
            found = _writer_field(field, by_name)
            if found is None:
                column = _default_column(field, len(values))
                assert column is not None
                children.append(column)
            else:
                children.append(resolve(values.field(found.name), found.type, field.type))
        mask = values.is_null() if values.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if reader.kind == "enum" and not set(writer.symbols) <= set(reader.symbols):
        known = pc.is_in(values, value_set=pa.array(reader.symbols, pa.string()))
        # (the registry's check admits this writer only when the reader has a default symbol)
        return pc.if_else(pc.fill_null(known, True), values, pa.scalar(reader.enum_default))
    if values.type == target:
        return values
    if pa.types.is_temporal(values.type):  # Avro resolves the numbers, whatever they mean
        values = values.cast(pa.int32() if pa.types.is_date32(values.type) else _INT64)
    return values.cast(target)


def _writer_field(field: AvroField, writer_fields: dict[str, AvroField]) -> AvroField | None:
    for name in (field.name, *field.aliases):
        if name in writer_fields:
            return writer_fields[name]
    return None


def _default_column(field: AvroField, count: int) -> pa.Array | None:
    """A reader field's default for every record (None: not one Arrow can hold)."""
    default = field.default
    if isinstance(default, str) and field.type.kind in ("bytes", "fixed"):
        default = default.encode("latin-1")  # Avro's JSON form of bytes
    try:
        return pa.repeat(pa.scalar(default, type=arrow_type(field.type)), count)
    except (pa.ArrowException, TypeError, ValueError, UnicodeEncodeError):
        return None


@dataclass(slots=True)
class _Cursor:
    """Per record: where its next field starts, where it ends, whether it is already bad.

    Positions only grow. One past a record's end (a field longer than what is left) reads
    bytes of the next record or clamped ones, but never changes another record, and the record
    is bad when the walk ends off its end."""

    data: pa.Array  # uint8, the whole buffer
    last: pa.Scalar  # its last index
    positions: pa.Array  # int64
    ends: pa.Array  # int64
    bad: pa.Array | None = None  # bool; None: no record is bad yet

    def flag(self, condition: pa.Array) -> None:
        self.bad = condition if self.bad is None else pc.or_(self.bad, condition)

    def advance(self, widths: pa.Array) -> None:
        self.positions = pc.add(self.positions, widths)

    def subset(self, rows: pa.Array) -> _Cursor:
        return _Cursor(
            self.data,
            self.last,
            self.positions.filter(rows),
            self.ends.filter(rows),
            None if self.bad is None else self.bad.filter(rows),
        )

    def merge(self, rows: pa.Array, part: _Cursor) -> None:
        """Take back the positions (and bad records) of `subset(rows)` after reading it."""
        self.positions = pc.replace_with_mask(self.positions, rows, part.positions)
        if part.bad is not None:
            known = self.bad if self.bad is not None else pa.repeat(pa.scalar(False), len(rows))
            self.bad = pc.replace_with_mask(known, rows, part.bad)

    def byte(self, offset: int) -> pa.Array:
        """The byte `offset` past each position (clamped to the buffer), as uint64."""
        where = self.positions if offset == 0 else pc.add(self.positions, _OFFSETS[offset])
        return pc.take(self.data, pc.min_element_wise(where, self.last)).cast(_UINT64)


class ColumnWiseDecoding:
    """Reads the payloads of one writer schema column-wise."""

    def __init__(self, writer: AvroType) -> None:
        assert readable(writer), "not a schema read column-wise"
        self.writer = writer
        self.arrow_type = arrow_type(writer)

    def decode(self, payloads: Payloads) -> tuple[pa.Array, pa.Array | None] | None:
        """The records in the writer's Arrow type (null where bad) and which are bad (None:
        none); None when this group is better read by fastavro."""
        if payloads.data.size == 0:
            return None
        data = pa.Array.from_buffers(pa.uint8(), payloads.data.size, [None, payloads.data])
        last = int64_scalar(payloads.data.size - 1)
        cursor = _Cursor(data, last, payloads.starts, payloads.ends)
        try:
            values = self._read(self.writer, cursor, payloads.data)
        except (_NotColumnWise, KafkaError, pa.ArrowException):
            return None
        cursor.flag(pc.not_equal(cursor.positions, cursor.ends))
        bad = cursor.bad
        if bad is None or not pc.any(bad).as_py():
            return values, None
        return pc.if_else(bad, pa.scalar(None, self.arrow_type), values), bad

    def _read(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        if avro.nullable:
            return self._nullable(avro, cursor, buffer)
        read: Callable[[ColumnWiseDecoding, AvroType, _Cursor, pa.Buffer], pa.Array]
        read = _READERS[avro.kind]
        values = read(self, avro, cursor, buffer)
        if avro.logical:
            return values.cast(arrow_type(avro))
        return values

    def _nullable(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        branches = _varint(cursor)
        cursor.flag(pc.or_(pc.less(branches, ZERO), pc.greater(branches, ONE)))
        present = pc.equal(branches, int64_scalar(1 - avro.null_index))
        inner = _non_null(avro)
        kind = arrow_type(inner)
        count = pc.sum(present).as_py() or 0
        if count == 0:
            return pa.nulls(len(branches), kind)
        if count == len(branches):
            return self._read(inner, cursor, buffer)
        part = cursor.subset(present)
        values = self._read(inner, part, buffer)
        cursor.merge(present, part)
        places = pc.replace_with_mask(pa.nulls(len(branches), _INT64), present, row_numbers(count))
        return pc.take(values, places)

    def _record(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        children = [self._read(field.type, cursor, buffer) for field in avro.fields]
        fields = [pa.field(field.name, arrow_type(field.type)) for field in avro.fields]
        if not fields:
            return pa.array([{}] * len(cursor.positions), type=pa.struct([]))
        return pa.StructArray.from_arrays(children, fields=fields)

    def _null(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        return pa.nulls(len(cursor.positions))

    def _boolean(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        byte = cursor.byte(0)
        cursor.advance(repeated(1, len(byte)))
        return pc.equal(
            byte, _UINT64_ONE
        )  # (any other byte is false, as Avro's Java decoder has it)

    def _int(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        values = _varint(cursor)
        cursor.flag(pc.or_(pc.less(values, _INT32_MIN), pc.greater(values, _INT32_MAX)))
        return values.cast(pa.int32(), safe=False)

    def _long(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        return _varint(cursor)

    def _float(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        return _little_endian(cursor, 4).cast(pa.uint32(), safe=False).view(pa.float32())

    def _double(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        return _little_endian(cursor, 8).view(pa.float64())

    def _bytes(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        lengths = _varint(cursor)
        cursor.flag(pc.less(lengths, ZERO))
        return _span(cursor, pc.max_element_wise(lengths, ZERO), buffer)

    def _string(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        raw = self._bytes(avro, cursor, buffer)
        strings = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)
        try:
            strings.validate(full=True)
        except pa.ArrowInvalid:
            raise _NotColumnWise from None
        return strings

    def _enum(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        indices = _varint(cursor)
        size = int64_scalar(len(avro.symbols))
        cursor.flag(pc.or_(pc.less(indices, ZERO), pc.greater_equal(indices, size)))
        clamped = pc.min_element_wise(pc.max_element_wise(indices, ZERO), pc.subtract(size, ONE))
        return pc.take(pa.array(avro.symbols, pa.string()), clamped)

    def _fixed(self, avro: AvroType, cursor: _Cursor, buffer: pa.Buffer) -> pa.Array:
        return _span(cursor, repeated(avro.size, len(cursor.positions)), buffer)


_READERS: Final[dict[str, Any]] = {
    "record": ColumnWiseDecoding._record,
    "null": ColumnWiseDecoding._null,
    "boolean": ColumnWiseDecoding._boolean,
    "int": ColumnWiseDecoding._int,
    "long": ColumnWiseDecoding._long,
    "float": ColumnWiseDecoding._float,
    "double": ColumnWiseDecoding._double,
    "bytes": ColumnWiseDecoding._bytes,
    "string": ColumnWiseDecoding._string,
    "enum": ColumnWiseDecoding._enum,
    "fixed": ColumnWiseDecoding._fixed,
}


def _non_null(avro: AvroType) -> AvroType:
    values = {name: getattr(avro, name) for name in AvroType.__dataclass_fields__}
    values.update(nullable=False, null_index=0)
    return AvroType(**values)


def _varint(cursor: _Cursor) -> pa.Array:
    """The zig-zag varint at each position (as many bytes as the longest takes, up to ten).
    The bits are gathered as uint64: Arrow leaves a signed value shifted by 63 unchanged."""
    raw = None
    widths = None
    going = None  # records whose varint goes on past the bytes read so far
    for k in range(_MAX_VARINT_BYTES):
        byte = cursor.byte(k)
        bits = pc.shift_left(pc.bit_wise_and(byte, _LOW_BITS), _VARINT_SHIFTS[k])
        if going is None:
            raw, widths = bits, repeated(1, len(byte))
            going = pc.greater_equal(byte, _HIGH_BIT)
        else:
            raw = pc.if_else(going, pc.bit_wise_or(raw, bits), raw)
            widths = pc.add(widths, going.cast(_INT64))
            going = pc.and_(going, pc.greater_equal(byte, _HIGH_BIT))
        if not pc.any(going).as_py():
            break
    else:
        cursor.flag(going)  # longer than ten bytes
    assert raw is not None and widths is not None
    cursor.advance(widths)
    # zig-zag: the value shifted right by one, negated (all bits flipped) when the lowest is set
    magnitude = pc.shift_right(raw, _UINT64_ONE).view(_INT64)
    sign = pc.negate(pc.bit_wise_and(raw, _UINT64_ONE).view(_INT64))
    return pc.bit_wise_xor(magnitude, sign)


def _little_endian(cursor: _Cursor, width: int) -> pa.Array:
    """The `width` bytes at each position as one little-endian uint64 word."""
    word = cursor.byte(0)
    for k in range(1, width):
        word = pc.bit_wise_or(word, pc.shift_left(cursor.byte(k), _BYTE_SHIFTS[k]))
    cursor.advance(repeated(width, len(word)))
    return word


def _span(cursor: _Cursor, lengths: pa.Array, buffer: pa.Buffer) -> pa.Array:
    """The `lengths` bytes at each position, gathered into one binary array (cut at the
    record's end: the spans stay in order, and a record whose field runs past it is bad)."""
    cursor.flag(pc.greater(cursor.positions, cursor.ends))  # (an earlier field ran past it)
    starts = pc.min_element_wise(cursor.positions, cursor.ends)
    room = pc.subtract(cursor.ends, starts)
    cursor.flag(pc.greater(lengths, room))
    stops = pc.add(starts, pc.min_element_wise(lengths, room))
    cursor.positions = stops
    return gather(buffer, interleave(starts, stops), len(starts))
