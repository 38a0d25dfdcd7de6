"""`moldau cluster log-dirs describe`: Kafka's `kafka-log-dirs.sh --describe` (LogDirsCommand).

Per broker (every broker, or `--broker-list`), each log dir with its error and, per replica
(every topic, or `--topic-list`), its size, offset lag and whether it is the future replica of a
move between log dirs. The text output is Kafka's: two lines, then one line of JSON in Kafka's
shape (`{"brokers":[{"broker":1,"logDirs":[{"logDir":..,"error":..,"partitions":[{"partition":
"t-0","size":..,"offsetLag":..,"isFuture":..}]}]}],"version":1}`), so scripts written for
Kafka's tool read it; `--format json|yaml` prints Moldau's own shape (below), with the capacity.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Annotated, Any

import typer

from moldau.cli.common import (
    BootstrapOption,
    ExitCode,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    emit,
    fail,
    run,
)
from moldau.cli.reassignment_plan import PlanError, parse_broker_list
from moldau.client.admin import AdminClient, LogDirDescription

app = typer.Typer(
    help="The brokers' log directories and the replicas in them (kafka-log-dirs.sh).",
    no_args_is_help=True,
)


def log_dirs_data(
    described: Mapping[int, Mapping[str, LogDirDescription]], topics: Collection[str] | None
) -> list[dict[str, Any]]:
    """Brokers, their log dirs and replicas as plain data (brokers, dirs and replicas sorted;
    only the replicas of `topics` when given)."""
    return [
        {
            "broker": broker,
            "log_dirs": [
                {
                    "log_dir": path,
                    "error": None if description.error is None else description.error.name,
                    "total_bytes": description.total_bytes,
                    "usable_bytes": description.usable_bytes,
                    "replicas": [
                        {
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "size": info.size,
                            "offset_lag": info.offset_lag,
                            "is_future": info.is_future,
                        }
                        for tp, info in sorted(description.replicas.items())
                        if topics is None or tp.topic in topics
                    ],
                }
                for path, description in sorted(dirs.items())
            ],
        }
        for broker, dirs in sorted(described.items())
    ]


def kafka_log_dirs_json(data: list[dict[str, Any]]) -> str:
    """`log_dirs_data` in the JSON line kafka-log-dirs.sh prints (keys sorted, as it prints
    them; the error is the error's name where Kafka gives its exception's class)."""
    return json.dumps(
        {
            "version": 1,
            "brokers": [
                {
                    "broker": broker["broker"],
                    "logDirs": [
                        {
                            "logDir": log_dir["log_dir"],
                            "error": log_dir["error"],
                            "partitions": [
                                {
                                    "partition": f"{r['topic']}-{r['partition']}",
                                    "size": r["size"],
                                    "offsetLag": r["offset_lag"],
                                    "isFuture": r["is_future"],
                                }
                                for r in log_dir["replicas"]
                            ],
                        }
                        for log_dir in broker["log_dirs"]
                    ],
                }
                for broker in data
            ],
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def parse_topic_list(text: str) -> list[str]:
    """`--topic-list a,b` as topic names, each once, in order."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise PlanError(f"topic list '{text}' must be topic names separated by commas, e.g. a,b")
    return list(dict.fromkeys(names))


@app.command("describe")
def describe(
    broker_list: Annotated[
        str | None,
        typer.Option(
            "--broker-list",
            help="The brokers to ask, e.g. 1,2,3 (default: every broker).",
            show_default=False,
        ),
    ] = None,
    topic_list: Annotated[
        str | None,
        typer.Option(
            "--topic-list",
            help="Only the replicas of these topics, e.g. a,b (default: every topic).",
            show_default=False,
        ),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Each broker's log dirs (error, capacity) and the replicas in them (size, offset lag,
    future replica of a move between log dirs)."""
    try:
        brokers = parse_broker_list(broker_list) if broker_list is not None else None
        topics = parse_topic_list(topic_list) if topic_list is not None else None
    except PlanError as exc:
        fail(str(exc))
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            existing = list((await admin.describe_cluster()).brokers)
            unknown = [b for b in brokers or () if b not in existing]
            if unknown:
                fail(
                    f"brokers {','.join(map(str, unknown))} of --broker-list are not in the "
                    f"cluster (its brokers are {','.join(map(str, existing))}); see them with "
                    "`moldau cluster info`",
                    ExitCode.KAFKA_ERROR,
                )
            described = await admin.describe_log_dirs(existing if brokers is None else brokers)
        data = log_dirs_data(described, topics)
        emit(
            data,
            output,
            "Querying brokers for log directories information\n"
            "Received log directory information from brokers "
            f"{','.join(str(b) for b in sorted(described))}\n"
            f"{kafka_log_dirs_json(data)}",
        )

    run(body())
