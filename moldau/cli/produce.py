"""`moldau produce TOPIC [FILE...]`: records from stdin or files, kcat-style.

One record per line (or per `-D` delimiter, or per file with `-l`); `-K :` splits each record into
key and value at the first delimiter, `-k KEY` gives every record the same key, `-H k=v` adds
headers, `-p` picks the partition (default: Kafka's murmur2 for keyed records), `-z` compresses.
A topic that does not exist is created when the cluster allows it (`auto.create.topics.enable`),
as other producers ask for it (`-X allow.auto.create.topics=false` asks not to). With
`--value-schema`/`--key-schema` each value (key) is a JSON document, encoded with the schema in
the registry's wire format (`moldau.cli.registry_options`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from moldau.cli.common import (
    BootstrapOption,
    ExitCode,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    counted,
    emit,
    fail,
    parse_key_values,
    run,
    stderr,
)
from moldau.cli.formatting import unescape
from moldau.cli.registry_options import (
    KeySchemaOption,
    RegistryCaOption,
    RegistryOption,
    RegistryUserOption,
    ValueSchemaOption,
    registry_client,
    with_registry,
)
from moldau.client.cluster import Cluster, TopicInfo
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.producer import Producer, RecordMetadata

_MAX_QUEUED = 100_000


async def split_records(stream: BinaryIO, delimiter: bytes) -> AsyncIterator[bytes]:
    """Records separated by `delimiter`, as soon as each is complete (reads happen in a thread so
    the producer keeps sending while stdin waits); a trailing delimiter makes no empty record."""
    read = getattr(stream, "read1", stream.read)
    pending = b""
    while True:
        chunk = await asyncio.to_thread(read, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(delimiter)
        for record in complete:
            yield record
    if pending:
        yield pending


async def topic_for_writing(cluster: Cluster, name: str, *, auto_create: bool) -> TopicInfo:
    """The topic's metadata; a Metadata request that allows auto-creation creates it when the
    cluster does, and a topic created a moment ago may have no leader yet."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cluster.config.request_timeout
    while True:
        try:
            return await cluster.topic(name, allow_auto_create=auto_create)
        except KafkaException as exc:
            if exc.code is ErrorCode.unknown_topic_or_partition:
                fail(
                    f"topic '{name}' does not exist and the cluster does not create topics on "
                    f"first use (auto.create.topics.enable=false); create it with "
                    f"`moldau topic create {name}`"
                    if auto_create
                    else f"topic '{name}' does not exist; create it with "
                    f"`moldau topic create {name}`",
                    ExitCode.KAFKA_ERROR,
                )
            if exc.code is not ErrorCode.leader_not_available or loop.time() >= deadline:
                raise
        await asyncio.sleep(0.05)


def produce_command(
    topic: Annotated[str, typer.Argument(help="Topic to write to.", show_default=False)],
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="Files to read (default: stdin).", exists=True, dir_okay=False),
    ] = None,
    key: Annotated[str | None, typer.Option("-k", "--key", help="Key for every record.")] = None,
    key_delimiter: Annotated[
        str | None,
        typer.Option("-K", "--key-delimiter", help="Split each record into key and value here."),
    ] = None,
    delimiter: Annotated[
        str, typer.Option("-D", "--delimiter", help="Record delimiter (escapes allowed).")
    ] = "\\n",
    file_per_record: Annotated[
        bool, typer.Option("-l", "--file-as-record", help="Send each file as one record.")
    ] = False,
    header: Annotated[
        list[str] | None, typer.Option("-H", "--header", help="Header k=v (repeatable).")
    ] = None,
    partition: Annotated[
        int, typer.Option("-p", "--partition", help="Partition (default: by key, murmur2).")
    ] = -1,
    compression: Annotated[
        str | None,
        typer.Option("-z", "--compression", help="none, gzip, snappy, lz4 or zstd."),
    ] = None,
    acks: Annotated[str | None, typer.Option("--acks", help="0, 1 or all.")] = None,
    value_schema: ValueSchemaOption = None,
    key_schema: KeySchemaOption = None,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Write records read from stdin or files to a topic."""
    headers = [
        (k, v.encode())
        for k, v in parse_key_values(header, what="header", flag="-H", example="source=web").items()
    ]
    header_items: list[tuple[str, bytes | None]] = list(headers)
    if key is not None and key_delimiter is not None:
        fail("give either -k (one key for all records) or -K (a key delimiter), not both")
    # Retry through a broker restart, but report an outage within a minute.
    defaults: dict[str, Any] = {"message.timeout.ms": 60000, "allow.auto.create.topics": True}
    if compression is not None:
        defaults["compression.type"] = compression
    if acks is not None:
        defaults["acks"] = acks
    client = client_config(bootstrap, settings, **defaults)
    record_delimiter = unescape(delimiter)
    key_separator = None if key_delimiter is None else unescape(key_delimiter)
    if record_delimiter == b"" or key_separator == b"":
        fail("delimiters must not be empty")

    async def records() -> AsyncIterator[bytes]:
        streams = [path.open("rb") for path in files] if files else [sys.stdin.buffer]
        for stream in streams:
            with stream:
                if file_per_record:
                    yield await asyncio.to_thread(stream.read)
                else:
                    async for record in split_records(stream, record_delimiter):
                        yield record

    with_schemas = key_schema is not None or value_schema is not None

    async def body() -> None:
        summary: dict[int, list[int]] = {}
        failures: list[KafkaException] = []

        def delivered(error: KafkaException | None, metadata: RecordMetadata) -> None:
            if error is not None:
                failures.append(error)
                return
            first_last = summary.setdefault(
                metadata.partition, [metadata.offset, metadata.offset, 0]
            )
            first_last[1] = max(first_last[1], metadata.offset)
            first_last[2] += 1

        serializers = None
        if with_schemas:
            from moldau.cli.record_schemas import RecordSerializers

            serializers = await RecordSerializers.of(
                registry_client(registry, registry_user, registry_ca),
                topic=topic,
                key_schema=key_schema,
                value_schema=value_schema,
            )
        async with Producer(client) as producer:
            info = await topic_for_writing(
                producer.cluster,
                topic,
                auto_create=client.get_bool("allow.auto.create.topics"),
            )
            if partition >= len(info.partitions):
                fail(
                    f"topic '{topic}' has no partition {partition} (it has {len(info.partitions)})",
                    ExitCode.KAFKA_ERROR,
                )
            count = 0
            async for data in records():
                record_key: bytes | None = None if key is None else key.encode()
                value = data
                if key_separator is not None:
                    before, found, after = data.partition(key_separator)
                    record_key, value = (before, after) if found else (None, data)
                if serializers is not None:
                    record_key, value = serializers.encode(record_key, value, record=count + 1)
                producer.produce(
                    topic,
                    value,
                    record_key,
                    partition=partition,
                    headers=header_items,
                    on_delivery=delivered,
                )
                count += 1
                if len(producer) >= _MAX_QUEUED:
                    await producer.flush()
                if failures:
                    break
            await producer.flush()
        if failures:
            raise failures[0]
        data_out = {
            "topic": topic,
            "records": count,
            "partitions": [
                {"partition": p, "first_offset": v[0], "last_offset": v[1], "records": v[2]}
                for p, v in sorted(summary.items())
            ],
        }
        if output is OutputFormat.text:
            stderr.print(f"Produced {counted(count, 'record')} to {topic}.")
        else:
            emit(data_out, output)

    run(with_registry(body()) if with_schemas else body())


def register(root: typer.Typer) -> None:
    root.command("produce")(produce_command)
