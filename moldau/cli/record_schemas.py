"""The serializers of `moldau produce` and `consume` with `--key-schema`/`--value-schema`:
JSON text in, records in the registry's wire format out, and back (`moldau.registry.serde`).

`produce` registers a file's schema under the topic's subject (`TOPIC-key`, `TOPIC-value`), as
Confluent's serializers do by default, and frames every record with its id; a record that does
not fit stops the command (exit 1) naming the record. `consume` reads each record with the
schema its id names (fetched once per id), through the given reader schema unless `auto`; a
record that is not framed, or does not fit, is printed as it is after a warning on stderr.
Imported only when a schema option is given: it loads every schema type's library.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from moldau.cli.common import ExitCode, fail
from moldau.cli.registry_options import SchemaSpec, parse_schema_spec
from moldau.client.message import Message
from moldau.registry.client import RegistryClient
from moldau.registry.model import StoredSchema
from moldau.registry.serde import Codec, SerdeError, codec_for, frame, unframe

__all__ = ["RecordDeserializers", "RecordSerializers"]


async def _registered(client: RegistryClient, spec: SchemaSpec, subject: str) -> StoredSchema:
    """The registered schema `spec` names (a file's is registered under `subject` first)."""
    if spec.schema_id is not None:
        return await client.schema(spec.schema_id)
    if spec.latest:
        return (await client.version(subject)).schema
    assert spec.schema is not None
    text, schema_type = spec.schema.text, spec.schema.schema_type
    schema_id = await client.register(subject, text, schema_type=schema_type)
    return StoredSchema(schema_id=schema_id, schema_type=schema_type, text=text)


@dataclass(frozen=True, slots=True)
class _Serializer:
    schema_id: int
    codec: Codec
    side: str

    def encode(self, data: bytes, *, record: int) -> bytes:
        try:
            return frame(self.schema_id, self.codec.encode(data.decode("utf-8")))
        except UnicodeDecodeError:
            fail(f"record {record}: its {self.side} is not UTF-8 text", ExitCode.KAFKA_ERROR)
        except SerdeError as error:
            fail(
                f"record {record}: its {self.side} {error} (schema id {self.schema_id})",
                ExitCode.KAFKA_ERROR,
            )


@dataclass(frozen=True, slots=True)
class RecordSerializers:
    key: _Serializer | None
    value: _Serializer | None

    @classmethod
    async def of(
        cls,
        client: RegistryClient,
        *,
        topic: str,
        key_schema: str | None,
        value_schema: str | None,
    ) -> RecordSerializers:
        sides: dict[str, _Serializer | None] = {"key": None, "value": None}
        for side, text in (("key", key_schema), ("value", value_schema)):
            if text is None:
                continue
            spec = parse_schema_spec(text, option=f"--{side}-schema")
            stored = await _registered(client, spec, f"{topic}-{side}")
            codec = codec_for(await client.parsed(stored))
            sides[side] = _Serializer(stored.schema_id, codec, side)
        return cls(key=sides["key"], value=sides["value"])

    def encode(self, key: bytes | None, value: bytes, *, record: int) -> tuple[bytes | None, bytes]:
        """The key and value of record number `record`, each encoded if it has a schema (a
        missing key stays missing)."""
        if self.key is not None and key is not None:
            key = self.key.encode(key, record=record)
        if self.value is not None:
            value = self.value.encode(value, record=record)
        return key, value


class _Deserializer:
    def __init__(self, client: RegistryClient, reader: Codec | None) -> None:
        self.client = client
        self.reader = reader
        self._codecs: dict[int, Codec] = {}

    async def decode(self, data: bytes) -> Any:
        schema_id, payload = unframe(data)
        codec = self._codecs.get(schema_id)
        if codec is None:
            codec = codec_for(await self.client.parsed(await self.client.schema(schema_id)))
            self._codecs[schema_id] = codec
        return codec.decode(payload, self.reader)


class RecordDeserializers:
    def __init__(self, sides: dict[str, _Deserializer]) -> None:
        self.sides = sides

    @classmethod
    async def of(
        cls,
        client: RegistryClient,
        *,
        topics: list[str],
        key_schema: str | None,
        value_schema: str | None,
    ) -> RecordDeserializers:
        sides = {}
        for side, text in (("key", key_schema), ("value", value_schema)):
            if text is None:
                continue
            option = f"--{side}-schema"
            spec = parse_schema_spec(text, option=option, allow_auto=True)
            if spec.latest and len(topics) > 1:
                fail(f"{option} latest names one topic's subject; give id:N or a FILE")
            reader = None
            if not spec.auto:
                stored = spec.schema or await _registered(client, spec, f"{topics[0]}-{side}")
                reader = codec_for(await client.parsed(stored))
            sides[side] = _Deserializer(client, reader)
        return cls(sides)

    async def decode(self, message: Message) -> dict[str, Any]:
        """The decoded key and value of `message` as JSON data (a side without a schema, or
        that cannot be decoded, is left out)."""
        decoded = {}
        for side, deserializer in self.sides.items():
            data = message.key() if side == "key" else message.value()
            if data is None:
                continue
            try:
                decoded[side] = await deserializer.decode(data)
            except SerdeError as error:
                print(
                    f"warning: {message.topic()}-{message.partition()}@{message.offset()}: its "
                    f"{side} {error}; printed as it is",
                    file=sys.stderr,
                    flush=True,
                )
        return decoded

    @staticmethod
    def with_text(message: Message, decoded: dict[str, Any]) -> Message:
        """`message` with its decoded sides replaced by their JSON text (for `-f` formats)."""

        def text(side: str, raw: bytes | None) -> bytes | None:
            if side not in decoded:
                return raw
            return json.dumps(decoded[side], ensure_ascii=False, separators=(",", ":")).encode()

        timestamp_type, timestamp = message.timestamp()
        return Message(
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            key=text("key", message.key()),
            value=text("value", message.value()),
            headers=tuple(message.headers()),
            timestamp=timestamp,
            timestamp_type=timestamp_type,
            leader_epoch=message.leader_epoch(),
        )
