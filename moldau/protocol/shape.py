"""The shape check every request body passes before kio decodes it.

kio's native decoder trusts the lengths a frame claims: an array announcing 2^32 elements makes it
reserve 34 GB and abort the process, which no `except` can catch. It also decodes a null where the
schema allows none, and handlers then fail on `None`. So before decoding, one pass over the frame
checks, field by field against the message's schema, that

- every array, string and bytes length fits in the bytes that remain (an array cannot claim more
  elements than there are bytes left, each element taking at least one byte),
- null (-1, or 0 in compact encodings) appears only where the schema's version allows null,
- tagged fields stay inside the struct that carries them, and known tags hold valid values,

and raises `MalformedRequest` otherwise; Kafka closes the connection on a request it cannot parse,
and so does Moldau. The pass allocates nothing per element. One checker function per kio class is
generated as Python source (straight-line code, fixed-size runs folded into one addition) and
cached, so the cost is a few microseconds for the requests clients send all the time.

Encodings checked (non-flexible | flexible versions):
    string    int16 length, -1 null           | uvarint length+1, 0 null
    bytes     int32 length, -1 null           | uvarint length+1, 0 null  (records alike)
    array     int32 count, -1 null            | uvarint count+1, 0 null
    struct    nullable ones: int8 -1 null / 1 present; flexible structs end with tagged fields
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from functools import cache
from typing import Any, Final, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

__all__ = ["MalformedRequest", "check_shape", "checker"]

Buffer = bytes | bytearray | memoryview


class MalformedRequest(ValueError):
    """The bytes do not form a request (or response) of the version they claim."""


Checker = Callable[[Buffer, int, int], int]

_FIXED_SIZES: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_SIZED: Final = {"string": 2, "bytes": 4, "records": 4}  # width of the non-flexible length


def check_shape(schema: Any, frame: Buffer, offset: int) -> int:
    """Check the body of `schema` at `offset`; return where it ends. Raises MalformedRequest."""
    end = len(memoryview(frame))
    try:
        return _checker_of(schema)(frame, offset, end)
    except IndexError:
        raise MalformedRequest(f"{schema.__name__} runs past the end of the frame") from None


def _uvarint(data: Buffer, offset: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's lengths and counts are int32)."""
    view: Any = data
    result = 0
    shift = 0
    while True:
        if offset >= end:
            raise MalformedRequest("truncated varint")
        byte = view[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint longer than 5 bytes")


def _tagged_fields(
    data: Buffer, offset: int, end: int, known: dict[int, Checker], where: str
) -> int:
    count, offset = _uvarint(data, offset, end)
    if count > end - offset:
        raise MalformedRequest(f"{where}: {count} tagged fields in {end - offset} bytes")
    previous = -1
    for _ in range(count):
        tag, offset = _uvarint(data, offset, end)
        size, offset = _uvarint(data, offset, end)
        if tag <= previous:
            raise MalformedRequest(f"{where}: tagged fields out of order")
        previous = tag
        field_end = offset + size
        if field_end > end:
            raise MalformedRequest(f"{where}: tagged field {tag} runs past its struct")
        check = known.get(tag)
        if check is not None and check(data, offset, field_end) != field_end:
            raise MalformedRequest(f"{where}: tagged field {tag} does not fill its {size} bytes")
        offset = field_end
    return offset


def _int16(view: Any, offset: int) -> int:
    value: int = (view[offset] << 8) | view[offset + 1]
    return value - 0x10000 if value & 0x8000 else value


def _int32(view: Any, offset: int) -> int:
    value: int = int.from_bytes(view[offset : offset + 4], "big", signed=True)
    return value


def _nullable(annotation: Any) -> bool:
    return get_origin(annotation) in (types.UnionType,) and type(None) in get_args(annotation)


def checker(schema: Any) -> Checker:
    """The generated checker of one kio class (a request, response, or nested struct)."""
    return _checker_of(schema)


@cache
def _checker_of(schema: Any) -> Checker:
    generator = _Generator(schema.__name__, flexible=bool(schema.__flexible__))
    generator.struct_fields(1, schema, schema.__name__)
    return generator.build()


def _tagged_field_checker(schema: type[Any], field: dataclasses.Field[Any]) -> Checker:
    """A checker for one tagged field's value (tagged fields exist only in flexible versions)."""
    generator = _Generator(f"{schema.__name__}_{field.name}", flexible=True)
    generator.field(1, field, f"{schema.__name__}.{field.name}")
    generator.flush(1)
    return generator.build()


class _Generator:
    """Python source for one message: straight-line code over its fields, nested structs inlined,
    a loop per array. One-byte varints (every length below 128) are read inline."""

    def __init__(self, name: str, *, flexible: bool) -> None:
        self.name = name
        self.flexible = flexible
        self.lines: list[str] = ["    v = data"]
        self.namespace: dict[str, Any] = {
            "Malformed": MalformedRequest,
            "uvarint": _uvarint,
            "int16": _int16,
            "int32": _int32,
            "tagged_fields": _tagged_fields,
        }
        self.pending = 0  # fixed-size bytes not yet added to `o`
        self.counter = 0

    def build(self) -> Checker:
        self.emit(1, "return o")
        source = f"def check_{self.name}(data, o, end):\n" + "\n".join(self.lines) + "\n"
        exec(compile(source, f"<shape check of {self.name}>", "exec"), self.namespace)
        function: Checker = self.namespace[f"check_{self.name}"]
        function.__source__ = source  # type: ignore[attr-defined]
        return function

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def fail(self, depth: int, condition: str, message: str) -> None:
        self.emit(depth, f"if {condition}: raise Malformed({message!r})")

    def flush(self, depth: int) -> None:
        """Add the fixed-size run to `o` and check it fits."""
        if self.pending:
            self.emit(depth, f"o += {self.pending}")
            self.fail(depth, "o > end", f"{self.name} is truncated")
            self.pending = 0

    def local(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def struct_fields(self, depth: int, schema: type[Any], where: str) -> None:
        """The fields of one struct in wire order, then (flexible) its tagged-field section."""
        tagged: dict[int, Checker] = {}
        for field in dataclasses.fields(schema):
            tag = field.metadata.get("tag")
            if tag is None:
                self.field(depth, field, f"{where}.{field.name}")
            else:
                tagged[int(tag)] = _tagged_field_checker(schema, field)
        self.flush(depth)
        if self.flexible:
            known = self.local("tags")
            self.namespace[known] = tagged
            self.fail(depth, "o >= end", f"{where} has no tagged-field section")
            self.emit(depth, "if v[o] == 0: o += 1")
            self.emit(depth, f"else: o = tagged_fields(v, o, end, {known}, {where!r})")

    def uvarint(self, depth: int, target: str, where: str) -> None:
        self.fail(depth, "o >= end", f"{where} is truncated")
        self.emit(depth, f"{target} = v[o]")
        self.emit(depth, "o += 1")
        self.emit(depth, f"if {target} & 0x80: {target}, o = uvarint(v, o - 1, end)")

    def field(self, depth: int, field: dataclasses.Field[Any], where: str) -> None:
        kind = classify_field(field)
        nullable = _nullable(field.type)
        kafka_type = field.metadata.get("kafka_type")
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            self.array(depth, kind, kafka_type, nullable, where)
        elif isinstance(kind, EntityField):
            self.struct(depth, kind.type_, nullable, where)
        else:
            self.primitive(depth, kafka_type, nullable, where)

    def primitive(self, depth: int, kafka_type: str | None, nullable: bool, where: str) -> None:
        if kafka_type in _FIXED_SIZES:
            self.pending += _FIXED_SIZES[kafka_type]
            return
        if kafka_type not in _SIZED:
            raise TypeError(f"{where}: unknown kafka_type {kafka_type!r}")
        self.flush(depth)
        n = self.local("n")
        if self.flexible:
            self.uvarint(depth, n, where)
            if nullable:
                self.emit(depth, f"if {n}: o += {n} - 1")
            else:
                self.fail(depth, f"not {n}", f"{where} is null")
                self.emit(depth, f"o += {n} - 1")
        else:
            width = _SIZED[kafka_type]
            read = "int16" if width == 2 else "int32"
            self.fail(depth, f"o + {width} > end", f"{where} is truncated")
            self.emit(depth, f"{n} = {read}(v, o)")
            self.emit(depth, f"o += {width}")
            self.emit(depth, f"if {n} < 0:")
            self.fail(depth + 1, f"{n} != -1" if nullable else "True", f"{where} has a bad length")
            self.emit(depth, "else:")
            self.emit(depth + 1, f"o += {n}")
        self.fail(depth, "o > end", f"{where} runs past the end")

    def count(self, depth: int, nullable: bool, where: str) -> str:
        """Read an array's element count into a local; -1 stands for null."""
        self.flush(depth)
        n = self.local("n")
        if self.flexible:
            self.uvarint(depth, n, where)
            self.emit(depth, f"{n} -= 1")
        else:
            self.fail(depth, "o + 4 > end", f"{where} is truncated")
            self.emit(depth, f"{n} = int32(v, o)")
            self.emit(depth, "o += 4")
            self.fail(depth, f"{n} < -1", f"{where} has a bad count")
        if not nullable:
            self.fail(depth, f"{n} == -1", f"{where} is null")
        self.fail(depth, f"{n} > end - o", f"{where} claims more elements than bytes")
        return n

    def array(
        self,
        depth: int,
        kind: EntityTupleField | PrimitiveTupleField,
        kafka_type: str | None,
        nullable: bool,
        where: str,
    ) -> None:
        n = self.count(depth, nullable, where)
        if isinstance(kind, PrimitiveTupleField) and kafka_type in _FIXED_SIZES:
            self.emit(depth, f"if {n} > 0:")
            self.emit(depth + 1, f"o += {n} * {_FIXED_SIZES[kafka_type]}")
            self.fail(depth + 1, "o > end", f"{where} runs past the end")
            return
        self.emit(depth, f"for _ in range({n}):")
        self.emit(depth + 1, "pass")  # (a struct without fields would leave the loop empty)
        if isinstance(kind, EntityTupleField):
            self.struct_fields(depth + 1, kind.type_, where + "[]")
        else:
            self.primitive(depth + 1, kafka_type, False, where + "[]")
        self.flush(depth + 1)

    def struct(self, depth: int, schema: type[Any], nullable: bool, where: str) -> None:
        self.flush(depth)
        if not nullable:
            self.struct_fields(depth, schema, where)
            return
        # Nullable structs carry a presence byte: -1 for null, 1 for a value.
        self.fail(depth, "o >= end", f"{where} is truncated")
        self.emit(depth, "o += 1")
        self.fail(depth, "v[o - 1] not in (1, 255)", f"{where} has a bad presence byte")
        self.emit(depth, "if v[o - 1] == 1:")
        self.struct_fields(depth + 1, schema, where)
        self.flush(depth + 1)
