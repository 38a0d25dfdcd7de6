"""Decoding the source's framed keys and values (`FramedDecoder`) without a registry or Spark:
Avro read with the subject's latest version whatever version wrote a record, JSON Schema
documents, the rows put back in order across schema ids, and what FAILFAST and PERMISSIVE do
with records that cannot be decoded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from moldau.spark.framed_source import (
    CorruptRecord,
    FramedDecoder,
    ReaderSchema,
    column_decoder,
    decoded_schema,
)
from moldau.spark.framing import frame_header, read_frames
from moldau.spark.registry_options import (
    FramedColumn,
    RecordFormat,
    RegistryConnection,
    RegistryOptions,
)
from moldau.spark.schema import source_schema

from .registry_records import (
    ORDER_V1,
    ORDER_V2,
    FakeLookup,
    avro,
    avro_record,
    json_record,
    json_schema,
    source_batch,
)

PLACED_MS = 1_700_000_000_123
PLACED = datetime.fromtimestamp(PLACED_MS / 1000, tz=UTC)


def order(number: int, *, v2: bool = False) -> dict[str, Any]:
    record = {
        "id": number,
        "customer": f"customer-{number}",
        "quantity": number % 7,
        "amount": number * 1.5,
        "note": None if number % 2 else f"note {number}",
        "placed": PLACED_MS + number,
    }
    if v2:
        record["channel"] = "app"
    return record


def expected(number: int, *, channel: str = "web") -> dict[str, Any]:
    record = order(number)
    record["placed"] = datetime.fromtimestamp((PLACED_MS + number) / 1000, tz=UTC)
    return {**record, "channel": channel}


def decoder(
    lookup: FakeLookup,
    *,
    reader_id: int,
    record_format: RecordFormat = RecordFormat.AVRO,
    permissive: bool = False,
    column: str = "value",
) -> FramedDecoder:
    framed = FramedColumn(column=column, format=record_format, subject=f"t-{column}")
    parsed = lookup.schemas[reader_id]
    spark_type = column_decoder(framed, parsed, description="the reader").spark_type
    options = RegistryOptions(
        connection=RegistryConnection(url="http://127.0.0.1:1"),
        columns=(framed,),
        permissive=permissive,
    )
    reader = ReaderSchema(framed, reader_id, 2, spark_type)
    return FramedDecoder(options, [reader], lookup=lookup)


def test_frames_give_ids_and_payloads_column_wise() -> None:
    values = pa.array([b"\0\0\0\1\2abc", None, b"", b"\1\0\0\0\1x", b"\0\0\0\0\7", b"\0\0"])
    frames = read_frames(values.slice(1))
    assert frames.schema_ids.to_pylist() == [None, None, None, 7, None]
    assert frames.framed.to_pylist() == [False, False, False, True, False]
    assert frames.unframed.to_pylist() == [False, True, True, False, True]
    whole = read_frames(values)
    assert whole.payloads.take(pa.array([0])).as_bytes(whole.data_bytes) == [b"abc"]


def test_avro_records_of_v1_and_v2_are_read_as_v2_in_row_order() -> None:
    lookup = FakeLookup({1: avro(ORDER_V1), 2: avro(ORDER_V2)})
    values = [
        avro_record(2, ORDER_V2, order(0, v2=True))
        if n % 3 == 0
        else avro_record(1, ORDER_V1, order(n))
        for n in range(30)
    ]
    values[5] = None  # a tombstone stays null
    decoded = decoder(lookup, reader_id=2).decode(source_batch(values))
    rows = decoded.column("value").to_pylist()
    assert rows[5] is None
    for number, row in enumerate(rows):
        if number == 5:
            continue
        if number % 3 == 0:
            assert row == expected(0, channel="app")
        else:
            assert row == expected(number)
    assert decoded.schema.field("value").type == pa.struct(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("quantity", pa.int64()),
            ("amount", pa.float64()),
            ("note", pa.string()),
            ("placed", pa.timestamp("us", tz="UTC")),
            ("channel", pa.string()),
        ]
    )
    assert sorted(set(lookup.asked)) == [1, 2]
    assert lookup.asked.count(1) == 1, "a writer schema is asked for once per task"
    assert decoded.column("offset").to_pylist() == list(range(30))


def test_the_decoded_schema_replaces_the_column_type_and_adds_corrupt_columns() -> None:
    lookup = FakeLookup({2: avro(ORDER_V2)})
    framed = FramedColumn(column="value", format=RecordFormat.AVRO, subject="t-value")
    spark_type = column_decoder(framed, lookup.schemas[2], description="v2").spark_type
    reader = ReaderSchema(framed, 2, 2, spark_type)
    schema = decoded_schema(source_schema(), [reader], permissive=True)
    assert schema.simpleString() == (
        "struct<key:binary,value:struct<id:bigint,customer:string,quantity:bigint,amount:double,"
        "note:string,placed:timestamp,channel:string>,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,_corrupt_value:binary>"
    )


def test_an_unknown_id_fails_the_task_naming_the_record_by_default() -> None:
    lookup = FakeLookup({1: avro(ORDER_V1)})
    values = [avro_record(1, ORDER_V1, order(0)), avro_record(9, ORDER_V1, order(1))]
    with pytest.raises(CorruptRecord, match=r"t-0 offset 1: schema id 9 is not in the registry"):
        decoder(lookup, reader_id=1).decode(source_batch(values))


def test_permissive_gives_null_and_the_bytes_of_what_cannot_be_decoded() -> None:
    lookup = FakeLookup({1: avro(ORDER_V1), 3: json_schema({"type": "object"})})
    good = avro_record(1, ORDER_V1, order(4))
    unknown_id = avro_record(9, ORDER_V1, order(1))
    truncated = good[:-3]
    trailing = good + b"\0"
    json_id = json_record(3, {"id": 1})
    values = [good, unknown_id, b"plain bytes", truncated, None, trailing, json_id, good]
    decoded = decoder(lookup, reader_id=1, permissive=True).decode(source_batch(values))
    rows = decoded.column("value").to_pylist()
    corrupt = decoded.column("_corrupt_value").to_pylist()
    assert rows[0] is not None and rows[0]["customer"] == "customer-4" and rows[7] == rows[0]
    assert rows[1:7] == [None] * 6
    assert corrupt == [None, unknown_id, b"plain bytes", truncated, None, trailing, json_id, None]


def test_failfast_names_why_a_record_cannot_be_decoded() -> None:
    lookup = FakeLookup({1: avro(ORDER_V1)})
    good = avro_record(1, ORDER_V1, order(4))
    for value, reason in (
        (b"plain", "not in the schema registry's wire format"),
        (good[:-3], "not Avro of schema id 1"),
        (good + b"\0", "1 bytes after the record"),
    ):
        with pytest.raises(CorruptRecord, match=reason):
            decoder(lookup, reader_id=1).decode(source_batch([good, value]))


def test_a_writer_the_reader_cannot_read_makes_its_records_bad() -> None:
    # v3 drops `customer`, which the v1 reader needs and has no default for
    v3 = {**ORDER_V1, "fields": [f for f in ORDER_V1["fields"] if f["name"] != "customer"]}
    lookup = FakeLookup({1: avro(ORDER_V1), 3: avro(v3)})
    record = {k: v for k, v in order(2).items() if k != "customer"}
    values = [avro_record(3, v3, record)]
    with pytest.raises(
        CorruptRecord, match=r"cannot be read with version 2 of subject 't-value'.*customer"
    ):
        decoder(lookup, reader_id=1).decode(source_batch(values))


def test_keys_are_decoded_like_values() -> None:
    key_schema = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
    lookup = FakeLookup({5: avro(key_schema)})
    keys = [avro_record(5, key_schema, {"id": n}) for n in range(3)]
    decoded = decoder(lookup, reader_id=5, column="key").decode(source_batch([b"v"] * 3, keys))
    assert decoded.column("key").to_pylist() == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert decoded.column("value").to_pylist() == [b"v"] * 3


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": ["number", "null"]},
        "address": {"$ref": "#/definitions/address"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "definitions": {
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def person(number: int) -> dict[str, Any]:
    return {
        "name": f"p{number}",
        "age": number,
        "score": number / 2,
        "address": {"city": "Prague"},
        "tags": ["a", "b"][: number % 3],
    }


def test_json_schema_documents_become_struct_columns() -> None:
    lookup = FakeLookup({7: json_schema(PERSON)})
    values = [json_record(7, person(n)) for n in range(5)]
    values[2] = json_record(
        7, {"name": "partial", "unknown": [1, 2]}
    )  # absent: null; extra: ignored
    decoded = decoder(lookup, reader_id=7, record_format=RecordFormat.JSON).decode(
        source_batch(values)
    )
    rows = decoded.column("value").to_pylist()
    assert rows[0] == person(0) and rows[4] == person(4)
    assert rows[2] == {"name": "partial", "age": None, "score": None, "address": None, "tags": None}


def test_json_documents_over_several_lines_or_of_the_wrong_type() -> None:
    lookup = FakeLookup({7: json_schema(PERSON)})
    pretty = frame_header(7) + b'{\n  "name": "pretty",\n  "age": 3\n}'
    wrong_type = json_record(7, {"name": "x", "age": "three"})
    not_json = frame_header(7) + b"{nope"
    values = [json_record(7, person(1)), pretty, wrong_type, not_json, frame_header(7) + b"null"]
    decoded = decoder(lookup, reader_id=7, record_format=RecordFormat.JSON, permissive=True).decode(
        source_batch(values)
    )
    rows = decoded.column("value").to_pylist()
    assert rows[0] == person(1)
    assert rows[1] is not None and (rows[1]["name"], rows[1]["age"]) == ("pretty", 3)
    assert rows[2:] == [None, None, None]
    assert decoded.column("_corrupt_value").to_pylist() == [None, None, wrong_type, not_json, None]
