"""Random kio entities: requests (and responses) that follow their schema, for the shape tests and
the fuzzers.

`random_entity(schema, rng)` fills every field of a kio dataclass with a random value of its Kafka
type, nulls only where the version allows them; `encode_entity` writes it with kio's own writer.
With a `Vocabulary`, values are those a real node knows (existing topic and group names, valid
record batches, -1/0/1 and the extremes of each integer type) so that requests get past the
"unknown topic" checks and into the handlers' logic. `rng` is any `random.Random`: a seeded one,
or `ByteRandom`, whose choices are read from a fuzzer's input bytes.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import types
import typing
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName, TransactionalId
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

from moldau.protocol.shape import _nullable

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
_SMALL_INTS = (-1, 0, 0, 1, 1, 2, 3)
_MILLIS = (0, 1, 100, 1000, 30_000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Vocabulary:
    """What a node knows, for requests that reach past its existence checks."""

    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()  # other names: config keys, member ids, principals
    record_batches: tuple[bytes, ...] = ()


class ByteRandom(random.Random):
    """A `random.Random` whose every draw is read from `data` (zeros once it is used up), so a
    coverage-guided fuzzer's byte mutations become choices of fields, lengths and values."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0
        super().__init__(0)

    def seed(self, *args: Any, **kwargs: Any) -> None:  # the bytes are the seed
        pass

    def getrandbits(self, k: int) -> int:
        count = (k + 7) // 8
        chunk = self._data[self._position : self._position + count]
        self._position += count
        return int.from_bytes(chunk, "little") & ((1 << k) - 1) if k else 0

    def random(self) -> float:
        return self.getrandbits(53) / (1 << 53)

    @property
    def exhausted(self) -> bool:
        return self._position >= len(self._data)


def random_primitive(
    kafka_type: str,
    rng: random.Random,
    *,
    vocabulary: Vocabulary | None = None,
    python_type: Any = None,
) -> Any:
    """A random value of one Kafka primitive type (kio's Python representation of it)."""
    if vocabulary is not None:
        value = _known_value(kafka_type, rng, vocabulary, python_type)
        if value is not None:
            return value
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64":
            return rng.randint(*_INT_RANGES[kafka_type])
        case "float64":
            return rng.random()
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        case "string":
            return "".join(rng.choice("abcé€𝄞") for _ in range(rng.randint(0, 6)))
        case "bytes" | "records":
            return rng.randbytes(rng.randint(0, 9))
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32":
            return datetime.timedelta(milliseconds=rng.randint(0, 2**31 - 1))
        case "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.randint(0, 2**40))
        case "datetime_i64":
            return EPOCH + datetime.timedelta(milliseconds=rng.randint(0, 2**40))
    raise AssertionError(kafka_type)


def _known_value(
    kafka_type: str, rng: random.Random, vocabulary: Vocabulary, python_type: Any
) -> Any:
    """A value a real request would carry, or None (four times in five) for a random one."""
    if rng.random() < 0.2:
        return None
    if kafka_type in _INT_RANGES:
        low, high = _INT_RANGES[kafka_type]
        if rng.random() < 0.8:
            return max(low, rng.choice(_SMALL_INTS))
        return rng.choice((low, high, min(high, 2**31 - 1), min(high, 1 << 20)))
    if kafka_type == "string":
        names = _names_for(python_type, vocabulary)
        return rng.choice(names) if names else None
    if kafka_type == "records" and vocabulary.record_batches:
        return b"".join(rng.choice(vocabulary.record_batches) for _ in range(rng.randint(1, 2)))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice(_MILLIS))
    if kafka_type == "datetime_i64":
        return EPOCH + datetime.timedelta(milliseconds=rng.choice((0, 1, 1_700_000_000_000)))
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    return None


def _names_for(python_type: Any, vocabulary: Vocabulary) -> tuple[str, ...]:
    kinds = _kinds(python_type)
    if TopicName in kinds:
        return vocabulary.topics
    if GroupId in kinds:
        return vocabulary.groups
    if TransactionalId in kinds:
        return vocabulary.transactional_ids
    return vocabulary.strings + vocabulary.topics + vocabulary.groups


def _kinds(python_type: Any) -> set[Any]:
    """The types inside `X | None` and `tuple[X, ...]`."""
    origin = typing.get_origin(python_type)
    if isinstance(python_type, types.UnionType) or origin is typing.Union or origin is tuple:
        return set().union(*(_kinds(inner) for inner in typing.get_args(python_type)))
    return {python_type}


def random_entity(
    schema: type[Any],
    rng: random.Random,
    depth: int = 0,
    *,
    vocabulary: Vocabulary | None = None,
) -> Any:
    """An instance of the kio dataclass `schema` with random fields (nulls where allowed)."""
    values = {}
    for field in dataclasses.fields(schema):
        kind = classify_field(field)
        kafka_type = field.metadata.get("kafka_type")
        if _nullable(field.type) and rng.random() < 0.3:
            values[field.name] = None
            continue
        if isinstance(kind, EntityTupleField):
            count = rng.randint(0, 3 if depth < 3 else 0)
            values[field.name] = tuple(
                random_entity(kind.type_, rng, depth + 1, vocabulary=vocabulary)
                for _ in range(count)
            )
        elif isinstance(kind, PrimitiveTupleField):
            values[field.name] = tuple(
                random_primitive(kafka_type, rng, vocabulary=vocabulary, python_type=field.type)
                for _ in range(rng.randint(0, 4))
            )
        elif isinstance(kind, EntityField):
            values[field.name] = random_entity(kind.type_, rng, depth + 1, vocabulary=vocabulary)
        else:
            values[field.name] = random_primitive(
                kafka_type, rng, vocabulary=vocabulary, python_type=field.type
            )
    return schema(**values)


def encode_entity(schema: type[Any], entity: Any) -> bytes:
    """The body kio writes for `entity` (no size prefix, no header)."""
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, entity)
    return buffer.getvalue()
