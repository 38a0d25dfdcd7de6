"""`moldau consume TOPIC...`: print records, kcat-style, as JSON lines or with `-f` tokens.

Without `-g` it reads the chosen partitions (default: all) from `-o` (default: beginning); with
`-g GROUP` it joins the group and starts from the committed offsets, and `-o beginning | end` say
where a partition with no committed offset starts (`auto.offset.reset`, as kafka-console-consumer's
`--from-beginning`). `-e` exits once every partition is read to its end, `-n` after N records.
`--value-schema`/`--key-schema` decode records in the registry's wire format to JSON
(`moldau.cli.record_schemas`).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from moldau.cli.common import (
    BootstrapOption,
    ExitCode,
    OutputFormat,
    SettingsOption,
    client_config,
    fail,
    run,
    to_yaml,
)
from moldau.cli.formatting import message_data, message_json, parse_format, render
from moldau.cli.offset_spec import OffsetSpec, SpecKind, parse_offset_spec
from moldau.cli.registry_options import (
    KeyReaderOption,
    RegistryCaOption,
    RegistryOption,
    RegistryUserOption,
    ValueReaderOption,
    registry_client,
    with_registry,
)
from moldau.client.consumer import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, Consumer
from moldau.types import TopicPartition


async def resolve_start(
    consumer: Consumer, partitions: list[TopicPartition], spec: OffsetSpec
) -> dict[TopicPartition, int]:
    """Absolute or logical start offsets for `spec` on each partition."""
    if spec.kind is SpecKind.BEGINNING:
        return dict.fromkeys(partitions, OFFSET_BEGINNING)
    if spec.kind is SpecKind.END:
        return dict.fromkeys(partitions, OFFSET_END)
    if spec.kind is SpecKind.STORED:
        return dict.fromkeys(partitions, OFFSET_STORED)
    if spec.kind is SpecKind.OFFSET:
        return dict.fromkeys(partitions, spec.value)
    if spec.kind is SpecKind.TIMESTAMP:
        found = await consumer.offsets_for_times(dict.fromkeys(partitions, spec.value))
        return {tp: (r.offset if r.offset >= 0 else OFFSET_END) for tp, r in found.items()}
    starts = {}
    for tp in partitions:
        low, high = await consumer.get_watermark_offsets(tp)
        starts[tp] = max(low, high - spec.value)
    return starts


def consume_command(
    topics: Annotated[list[str], typer.Argument(help="Topics to read.", show_default=False)],
    partition: Annotated[
        list[int] | None,
        typer.Option("-p", "--partition", help="Partition to read (repeatable; default: all)."),
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--offset",
            help="beginning | end | stored | N | -N (N before the end) | @TIMESTAMP "
            "(ms or ISO date-time). Default: beginning. With -g the group's committed offset "
            "wins; beginning | end say where a partition without one starts.",
        ),
    ] = None,
    exit_at_end: Annotated[
        bool, typer.Option("-e", "--exit", help="Exit once every partition is read to its end.")
    ] = False,
    count: Annotated[
        int | None, typer.Option("-n", "-c", "--count", help="Exit after this many records.")
    ] = None,
    format_string: Annotated[
        str | None,
        typer.Option(
            "-f",
            "--format-string",
            help="kcat format: %t %p %o %k %K %s %S %T %h, escapes \\n \\t (default: JSON lines).",
        ),
    ] = None,
    group: Annotated[
        str | None, typer.Option("-g", "--group", help="Consume as a member of this group.")
    ] = None,
    isolation_level: Annotated[
        str,
        typer.Option("--isolation-level", help="read_uncommitted or read_committed."),
    ] = "read_uncommitted",
    value_schema: ValueReaderOption = None,
    key_schema: KeyReaderOption = None,
    registry: RegistryOption = None,
    registry_user: RegistryUserOption = None,
    registry_ca: RegistryCaOption = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            help="json: JSON lines; yaml: a YAML document per record; text: values only.",
            case_sensitive=False,
        ),
    ] = OutputFormat.json,
) -> None:
    """Read records and print them (JSON lines by default)."""
    if isolation_level not in ("read_committed", "read_uncommitted"):
        fail(f"isolation level '{isolation_level}' is not read_committed or read_uncommitted")
    try:
        spec = parse_offset_spec(offset or ("stored" if group else "beginning"))
        parts = parse_format(format_string) if format_string is not None else None
    except ValueError as exc:
        fail(str(exc))
    if parts is None and output is OutputFormat.text:
        parts = parse_format("%s\\n")
    # With a group, the committed offset wins; -o only says where to start without one.
    reset = {SpecKind.BEGINNING: "earliest", SpecKind.END: "latest", SpecKind.STORED: "earliest"}
    if group and spec.kind not in reset:
        fail(
            "with -g a partition starts at the group's committed offset, or with -o beginning | "
            "end where it has none; move the offsets with `moldau group reset-offsets`"
        )
    if not group and spec.kind is SpecKind.STORED:
        fail("-o stored needs a group (-g GROUP)")
    if group and partition:
        fail("-p cannot be combined with -g: the group assigns partitions")
    if count is not None and count <= 0:
        fail("-n must be a positive number of records")
    defaults: dict[str, Any] = {
        "isolation.level": isolation_level,
        "auto.offset.reset": reset.get(spec.kind, "earliest") if group else "earliest",
        "enable.auto.commit": True,
    }
    if group:
        defaults["group.id"] = group
    client = client_config(bootstrap, settings, **defaults)

    with_schemas = key_schema is not None or value_schema is not None

    async def body() -> None:
        out = sys.stdout.buffer
        seen = 0
        schemas = None
        if with_schemas:
            from moldau.cli.record_schemas import RecordDeserializers

            schemas = await RecordDeserializers.of(
                registry_client(registry, registry_user, registry_ca),
                topics=topics,
                key_schema=key_schema,
                value_schema=value_schema,
            )
        async with Consumer(client) as consumer:
            consumer.on_transport_error = lambda error: print(
                f"warning: fetching failed: {error}; retrying", file=sys.stderr, flush=True
            )
            if group:
                for topic in topics:
                    await consumer.cluster.topic(topic)
                consumer.subscribe(topics)
            else:
                chosen: list[TopicPartition] = []
                for topic in topics:
                    info = await consumer.cluster.topic(topic)
                    wanted = partition if partition else list(info.partitions)
                    for p in wanted:
                        if p not in info.partitions:
                            fail(
                                f"topic '{topic}' has no partition {p} "
                                f"(it has {len(info.partitions)})",
                                ExitCode.KAFKA_ERROR,
                            )
                        chosen.append(TopicPartition(topic, p))
                consumer.assign(chosen, await resolve_start(consumer, chosen, spec))
            while True:
                batch = await consumer.consume(
                    500 if count is None else min(500, count - seen), 0.5
                )
                for message in batch:
                    decoded = await schemas.decode(message) if schemas is not None else {}
                    if parts is None and output is OutputFormat.yaml:
                        data = message_data(message) | decoded
                        out.write(b"---\n" + to_yaml(data).encode())
                    elif parts is None:
                        out.write(message_json(message, decoded).encode() + b"\n")
                    elif decoded and schemas is not None:
                        out.write(render(parts, schemas.with_text(message, decoded)))
                    else:
                        out.write(render(parts, message))
                seen += len(batch)
                if batch:
                    out.flush()
                if count is not None and seen >= count:
                    break
                if exit_at_end and consumer.assignment() and consumer.all_at_end():
                    break
            if group:
                await consumer.commit()

    run(with_registry(body()) if with_schemas else body())


def register(root: typer.Typer) -> None:
    root.command("consume")(consume_command)
