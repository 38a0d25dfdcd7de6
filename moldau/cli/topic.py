"""`moldau topic create | list | describe | alter-config | add-partitions | delete | trim`.

Text output keeps the lines of Kafka's `kafka-topics.sh` ("Created topic X.", the `Topic: ...
PartitionCount: ...` describe lines) and `kafka-delete-records.sh`; `--format json|yaml` prints
stable structured data.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from moldau.cli.common import (
    BootstrapOption,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    counted,
    emit,
    fail,
    parse_key_values,
    plain_table,
    run,
)
from moldau.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from moldau.client.errors import ErrorCode
from moldau.client.offsets import EARLIEST, LATEST
from moldau.protocol.uuids import uuid_to_text
from moldau.types import TopicPartition

app = typer.Typer(help="Create, inspect, change and delete topics.", no_args_is_help=True)

ConfigOption = Annotated[
    list[str] | None,
    typer.Option("-c", "--config", help="A topic config key=value (repeatable)."),
]

SOURCE_NAMES = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG: "topic",
    ConfigSource.DYNAMIC_BROKER_CONFIG: "broker",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "broker",
    ConfigSource.STATIC_BROKER_CONFIG: "broker",
    ConfigSource.DEFAULT_CONFIG: "default",
}


def source_name(source: ConfigSource) -> str:
    return SOURCE_NAMES.get(source, source.name.lower())


@app.command("create")
def create(
    names: Annotated[list[str], typer.Argument(help="Topic names.", show_default=False)],
    partitions: Annotated[
        int, typer.Option("-p", "--partitions", help="Partitions (-1: the broker's default).")
    ] = -1,
    replication_factor: Annotated[
        int,
        typer.Option("-r", "--replication-factor", help="Replicas (-1: the broker's default)."),
    ] = -1,
    config: ConfigOption = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Create topics."""
    configs = parse_key_values(config, what="topic config", flag="-c")
    if partitions == 0 or partitions < -1:
        fail(
            f"-p {partitions}: a topic needs at least one partition (-1 takes the broker's "
            "num.partitions)"
        )
    if replication_factor == 0 or replication_factor < -1:
        fail(
            f"-r {replication_factor}: a topic needs at least one replica (-1 takes the broker's "
            "default.replication.factor)"
        )
    client = client_config(bootstrap, settings)

    async def body() -> None:
        from moldau.client.errors import KafkaException

        async with AdminClient(client) as admin:
            created = []
            for name in names:
                try:
                    counts = await admin.create_topics(
                        [NewTopic(name, partitions, replication_factor, configs)]
                    )
                except KafkaException as exc:
                    if if_not_exists and exc.code is ErrorCode.topic_already_exists:
                        continue
                    raise
                created.append({"name": name, "partitions": counts.get(name, partitions)})
            emit(
                {"created": created},
                output,
                "\n".join(f"Created topic {item['name']}." for item in created),
            )

    # A topic that was refused does not exist: no `moldau topic describe` for it.
    run(body(), hints={ErrorCode.invalid_config: "the topic was not created"})


@app.command("list")
def list_topics(
    internal: Annotated[
        bool,
        typer.Option(
            "--internal",
            "-i",
            help="Include the internal topics (__consumer_offsets, __transaction_state).",
        ),
    ] = False,
    exclude_internal: Annotated[
        bool,
        typer.Option(
            "--exclude-internal",
            help="Leave out internal topics (the default; kept for kafka-topics.sh habits).",
        ),
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List topic names, one per line (as kafka-topics.sh --list); internal topics only with
    --internal (as rpk)."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            metadata = await admin.list_topics()
        topics = sorted(
            (
                t
                for t in metadata.topics.values()
                if not t.is_internal or (internal and not exclude_internal)
            ),
            key=lambda t: t.name,
        )
        data = [
            {
                "name": t.name,
                "partitions": len(t.partitions),
                "replication_factor": _replication_factor(t),
                "internal": t.is_internal,
            }
            for t in topics
        ]
        emit(data, output, "\n".join(t.name for t in topics))

    run(body())


def _replication_factor(topic: Any) -> int:
    return max((len(p.replicas) for p in topic.partitions.values()), default=0)


def _join(values: Any) -> str:
    return ",".join(str(v) for v in values)


@app.command("describe")
def describe(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Topic names (default: every topic).", show_default=False),
    ] = None,
    internal: Annotated[
        bool,
        typer.Option("--internal", help="With no names, include the internal topics too."),
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Partitions (Leader, Replicas, Isr, offsets) and configs with their source; with no names,
    every topic (as kafka-topics.sh --describe)."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            results = []
            texts = []
            chosen = names
            if not chosen:
                listed = await admin.list_topics()
                chosen = sorted(
                    t.name for t in listed.topics.values() if internal or not t.is_internal
                )
            for name in chosen:
                topic = await admin.describe_topic(name)
                configs = await admin.describe_configs(ConfigResource(ResourceType.TOPIC, name))
                tps = [TopicPartition(name, p) for p in topic.partitions]
                starts = await admin.list_offsets(dict.fromkeys(tps, EARLIEST))
                ends = await admin.list_offsets(dict.fromkeys(tps, LATEST))
                data = {
                    "name": name,
                    "topic_id": uuid_to_text(topic.topic_id),
                    "partition_count": len(topic.partitions),
                    "replication_factor": _replication_factor(topic),
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "log_start_offset": starts[TopicPartition(name, p.partition)].offset,
                            "high_watermark": ends[TopicPartition(name, p.partition)].offset,
                        }
                        for p in topic.partitions.values()
                    ],
                    "configs": [
                        {
                            "name": entry.name,
                            "value": None if entry.is_sensitive else entry.value,
                            "source": source_name(entry.source),
                            "read_only": entry.is_read_only,
                            "sensitive": entry.is_sensitive,
                        }
                        for entry in configs.values()
                    ],
                }
                results.append(data)
                texts.append(_describe_text(data))
        one = names is not None and len(names) == 1
        emit(results[0] if one else results, output, "\n\n".join(texts))

    run(body())


def _describe_text(data: dict[str, Any]) -> str:
    overrides = ",".join(
        f"{c['name']}={c['value']}" for c in data["configs"] if c["source"] == "topic"
    )
    lines = [
        f"Topic: {data['name']}\tTopicId: {data['topic_id'] or '-'}\t"
        f"PartitionCount: {data['partition_count']}\t"
        f"ReplicationFactor: {data['replication_factor']}\tConfigs: {overrides}"
    ]
    for p in data["partitions"]:
        lines.append(
            f"\tTopic: {data['name']}\tPartition: {p['partition']}\tLeader: {p['leader']}\t"
            f"Replicas: {_join(p['replicas'])}\tIsr: {_join(p['isr'])}\t"
            f"LogStartOffset: {p['log_start_offset']}\tHighWatermark: {p['high_watermark']}"
        )
    lines.append("")
    lines.append(
        plain_table(
            ["CONFIG", "VALUE", "SOURCE"],
            [
                (c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"])
                for c in data["configs"]
            ],
        )
    )
    return "\n".join(lines)


@app.command("alter-config")
def alter_config(
    name: Annotated[str, typer.Argument(help="Topic name.", show_default=False)],
    config: ConfigOption = None,
    delete: Annotated[
        list[str] | None,
        typer.Option("-d", "--delete", help="Remove a topic override (repeatable)."),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Set (-c key=value) or remove (-d key) topic config overrides."""
    sets = parse_key_values(config, what="topic config", flag="-c")
    if not sets and not delete:
        fail("nothing to change: give -c key=value or -d key")
    operations: list[tuple[str, AlterConfigOp, str | None]] = [
        (key, AlterConfigOp.SET, value) for key, value in sets.items()
    ]
    operations += [(key, AlterConfigOp.DELETE, None) for key in delete or ()]
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.describe_topic(name)
            await admin.incremental_alter_configs(
                ConfigResource(ResourceType.TOPIC, name), operations
            )
        emit(
            {"topic": name, "set": sets, "deleted": list(delete or ())},
            output,
            f"Completed updating config for topic {name}.",
        )

    run(body())


@app.command("add-partitions")
def add_partitions(
    name: Annotated[str, typer.Argument(help="Topic name.", show_default=False)],
    partitions: Annotated[
        int, typer.Option("-p", "--partitions", help="The new total number of partitions.")
    ],
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Grow a topic to a new total partition count."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.create_partitions({name: partitions})
        emit(
            {"topic": name, "partitions": partitions},
            output,
            f"Topic {name} now has {counted(partitions, 'partition')}.",
        )

    run(body())


@app.command("delete")
def delete_topics(
    names: Annotated[list[str], typer.Argument(help="Topic names.", show_default=False)],
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Delete topics and all their data."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.delete_topics(names)
        emit({"deleted": names}, output, "\n".join(f"Deleted topic {n}." for n in names))

    run(body())


@app.command("trim")
def trim(
    name: Annotated[str, typer.Argument(help="Topic name.", show_default=False)],
    offset: Annotated[
        str,
        typer.Option(
            "-o", "--offset", help="Delete records before this offset ('end': everything)."
        ),
    ],
    partition: Annotated[
        list[int] | None,
        typer.Option("-p", "--partition", help="Partition to trim (repeatable; default: all)."),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Delete records before an offset (Kafka's DeleteRecords, as kafka-delete-records.sh)."""
    if offset.strip().lower() in ("end", "latest", "-1"):
        target = -1
    elif offset.strip().isdigit():
        target = int(offset)
    else:
        fail(f"offset '{offset}' is not a non-negative number or 'end'")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            topic = await admin.describe_topic(name)
            chosen = partition if partition else list(topic.partitions)
            missing = [p for p in chosen if p not in topic.partitions]
            if missing:
                fail(
                    f"topic '{name}' has no partition {missing[0]} (it has {len(topic.partitions)})"
                )
            result = await admin.delete_records({TopicPartition(name, p): target for p in chosen})
        data = [
            {"topic": tp.topic, "partition": tp.partition, "low_watermark": low}
            for tp, low in sorted(result.items())
        ]
        text = (
            "Executing records delete operation\nRecords delete operation completed:\n"
            + "\n".join(
                f"partition: {d['topic']}-{d['partition']}\tlow_watermark: {d['low_watermark']}"
                for d in data
            )
        )
        emit(data, output, text)

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="topic")
