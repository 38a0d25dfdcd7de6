"""`moldau cluster reassign generate | execute | verify | cancel | list`: Kafka's
kafka-reassign-partitions.sh (ReassignPartitionsCommand) with its JSON files and its lines.

`execute` prints the current assignment to keep for a rollback, sets the replication throttles
when `--throttle` is given (the rates on every broker a moving partition touches, the throttled
replicas on its topics; the keys `moldau.replication.throttle` reads), then starts the
reassignments (AlterPartitionReassignments). `verify` reports each partition and, once all are
complete, removes the throttles, as `--verify` does; `cancel` stops them. Replicas the file
places in a named log dir are moved there after the reassignments start, and `verify` and
`cancel` cover those moves too (`reassign_moves.py`). The files' formats and the placement of
`generate` are in `reassignment_plan.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path
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
from moldau.cli.reassign_moves import cancel_moves, check_log_dirs, start_moves, verify_moves
from moldau.cli.reassignment_plan import (
    COMPLETE,
    FAILED,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    IN_PROGRESS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    PartitionShape,
    PlanError,
    Reassignment,
    brokers_involved,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    progress,
    propose,
    reassignment_data,
    reassignment_json,
    throttled_replicas,
)
from moldau.client.admin import AdminClient, AlterConfigOp, ConfigResource, ResourceType
from moldau.client.errors import ErrorCode, KafkaException
from moldau.types import TopicPartition

app = typer.Typer(
    help="Move partitions between brokers (kafka-reassign-partitions.sh, same JSON files).",
    no_args_is_help=True,
)

ReassignmentFileOption = Annotated[
    Path,
    typer.Option(
        "--reassignment-json-file",
        help='The reassignment JSON ({"version":1,"partitions":[...]}); - reads stdin.',
        show_default=False,
    ),
]
PreserveThrottlesOption = Annotated[
    bool,
    typer.Option("--preserve-throttles", help="Leave the replication throttles in place."),
]

STATUS_TEXT = {
    COMPLETE: "Reassignment of partition {tp} is completed.",
    IN_PROGRESS: "Reassignment of partition {tp} is still in progress.",
}


def _read(path: Path, what: str) -> str:
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the {what} {path}: {exc}")


def _plan(path: Path) -> Reassignment:
    try:
        return parse_reassignment(_read(path, "reassignment JSON file"))
    except PlanError as exc:
        fail(str(exc))


async def _current(
    admin: AdminClient, partitions: list[TopicPartition]
) -> dict[TopicPartition, tuple[int, ...]]:
    """The replicas of each named partition now; a topic or partition that does not exist is a
    cluster error (exit 1) naming it."""
    topics = sorted({tp.topic for tp in partitions})
    metadata = await admin.list_topics(topics)
    current = {}
    for tp in partitions:
        topic = metadata.topics.get(tp.topic)
        if topic is None or topic.error is not ErrorCode.none:
            raise KafkaException(ErrorCode.unknown_topic_or_partition, f"topic '{tp.topic}'")
        info = topic.partitions.get(tp.partition)
        if info is None:
            raise KafkaException(
                ErrorCode.unknown_topic_or_partition,
                f"topic '{tp.topic}' has no partition {tp.partition} "
                f"(it has {len(topic.partitions)})",
            )
        current[tp] = info.replicas
    return current


async def _check_brokers(admin: AdminClient, wanted: set[int]) -> dict[int, Any]:
    """The registered brokers (fenced ones too); any of `wanted` missing is a cluster error."""
    cluster = await admin.describe_cluster(include_fenced_brokers=True)
    unknown = sorted(wanted - set(cluster.brokers))
    if unknown:
        known = ",".join(str(b) for b in cluster.brokers)
        raise KafkaException(
            ErrorCode.invalid_replica_assignment,
            f"broker {unknown[0]} is not in the cluster (its brokers are {known}); "
            "see them with `moldau cluster info`",
        )
    return dict(cluster.brokers)


def _names(partitions: Any) -> str:
    return ",".join(str(tp) for tp in sorted(partitions))


@app.command("generate")
def generate(
    topics_file: Annotated[
        Path,
        typer.Option(
            "--topics-to-move-json-file",
            help='The topics to move: {"version":1,"topics":[{"topic":"t"}]}; - reads stdin.',
            show_default=False,
        ),
    ],
    broker_list: Annotated[
        str,
        typer.Option(
            "--broker-list", help="Brokers to place replicas on, e.g. 1,2,3.", show_default=False
        ),
    ],
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="Ignore the brokers' racks.")
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Propose a reassignment of whole topics over a list of brokers (nothing changes)."""
    try:
        names = parse_topics_to_move(_read(topics_file, "topics-to-move JSON file"))
        brokers = parse_broker_list(broker_list)
    except PlanError as exc:
        fail(str(exc))
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            registered = await _check_brokers(admin, set(brokers))
            current: dict[TopicPartition, tuple[int, ...]] = {}
            shapes = []
            for name in names:
                topic = await admin.describe_topic(name)
                current.update(
                    {TopicPartition(name, p): info.replicas for p, info in topic.partitions.items()}
                )
                factor = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
                shapes.append(PartitionShape(name, len(topic.partitions), factor))
        racks = {b: registered[b].rack for b in brokers}
        with_rack = [b for b in brokers if racks[b]]
        if disable_rack_aware or not with_rack:
            racks = {}
        elif len(with_rack) != len(brokers):
            missing = ",".join(str(b) for b in brokers if not racks[b])
            fail(
                f"brokers {missing} have no rack while others have one; "
                "give --disable-rack-aware to place replicas without racks"
            )
        try:
            proposed = propose(shapes, brokers, racks)
        except PlanError as exc:
            fail(str(exc))
        emit(
            {"current": reassignment_data(current), "proposed": reassignment_data(proposed)},
            output,
            "Current partition replica assignment\n"
            f"{reassignment_json(current)}\n\n"
            "Proposed partition reassignment configuration\n"
            f"{reassignment_json(proposed)}",
        )

    run(body())


async def _set_throttles(
    admin: AdminClient,
    current: dict[TopicPartition, tuple[int, ...]],
    target: dict[TopicPartition, tuple[int, ...]],
    rate: int,
) -> tuple[list[int], list[str]]:
    replicas = throttled_replicas(current, target)
    for topic, values in replicas.items():
        await admin.incremental_alter_configs(
            ConfigResource(ResourceType.TOPIC, topic),
            [(name, AlterConfigOp.SET, value) for name, value in values.items()],
        )
    brokers = brokers_involved(current, target)
    for broker in brokers:
        await admin.incremental_alter_configs(
            ConfigResource(ResourceType.BROKER, str(broker)),
            [
                (LEADER_THROTTLED_RATE, AlterConfigOp.SET, str(rate)),
                (FOLLOWER_THROTTLED_RATE, AlterConfigOp.SET, str(rate)),
            ],
        )
    return brokers, sorted(replicas)


async def _clear_throttles(admin: AdminClient, topics: list[str]) -> tuple[list[int], list[str]]:
    """Kafka's clearAllThrottles: the rates on every (unfenced) broker, the throttled replicas
    on the plan's topics that still exist."""
    cluster = await admin.describe_cluster()
    brokers = list(cluster.brokers)
    for broker in brokers:
        await admin.incremental_alter_configs(
            ConfigResource(ResourceType.BROKER, str(broker)),
            [
                (LEADER_THROTTLED_RATE, AlterConfigOp.DELETE, None),
                (FOLLOWER_THROTTLED_RATE, AlterConfigOp.DELETE, None),
            ],
        )
    existing = await admin.list_topics(topics)
    cleared = [t for t in topics if t in existing.topics]
    for topic in cleared:
        await admin.incremental_alter_configs(
            ConfigResource(ResourceType.TOPIC, topic),
            [
                (LEADER_THROTTLED_REPLICAS, AlterConfigOp.DELETE, None),
                (FOLLOWER_THROTTLED_REPLICAS, AlterConfigOp.DELETE, None),
            ],
        )
    return brokers, cleared


def _clearing_lines(brokers: list[int], topics: list[str]) -> list[str]:
    return [
        f"Clearing broker-level throttles on brokers {_join(brokers)}",
        f"Clearing topic-level throttles on topics {_join(topics)}",
    ]


def _refused(errors: dict[TopicPartition, KafkaException]) -> str:
    return "the cluster refused " + "; ".join(f"{exc}" for _, exc in sorted(errors.items()))


@app.command("execute")
def execute(
    reassignment_file: ReassignmentFileOption,
    throttle: Annotated[
        int,
        typer.Option(
            "--throttle",
            help="Limit replication of the moving partitions to this many bytes/s per broker "
            "(-1: no limit). `verify` removes it once every partition is moved.",
        ),
    ] = -1,
    additional: Annotated[
        bool,
        typer.Option(
            "--additional", help="Start these even while other reassignments are in progress."
        ),
    ] = False,
    timeout: Annotated[
        int,
        typer.Option(
            "--timeout",
            help="How long to wait, in ms, for the log dir moves the file asks for to start "
            "(a broker gaining a replica can move it only once it has it).",
        ),
    ] = 10000,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Start the reassignment a JSON file describes (print the current one to roll back), then
    move the replicas it places in a named log dir there."""
    plan = _plan(reassignment_file)
    target = plan.replicas
    if throttle < -1 or throttle == 0:
        fail(f"--throttle {throttle} must be a positive number of bytes/s (or -1: no limit)")
    if timeout < 0:
        fail(f"--timeout {timeout} must be a number of milliseconds, 0 or more")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            current = await _current(admin, list(target))
            await _check_brokers(admin, {b for replicas in target.values() for b in replicas})
            if plan.log_dirs:
                await check_log_dirs(admin, plan.log_dirs)
            if not additional and await admin.list_partition_reassignments():
                fail(
                    "there are reassignments in progress (see `moldau cluster reassign list`); "
                    "wait for them, cancel them, or give --additional",
                    ExitCode.KAFKA_ERROR,
                )
            throttled: tuple[list[int], list[str]] = ([], [])
            if throttle > 0:
                throttled = await _set_throttles(admin, current, target, throttle)
            results = await admin.alter_partition_reassignments(dict(target))
            started = [tp for tp, error in results.items() if error is None]
            errors = {tp: error for tp, error in results.items() if error is not None}
            moves: list[str] = []
            if plan.log_dirs and not errors:
                moves = await start_moves(admin, plan.log_dirs, timeout_s=timeout / 1000)
        lines = [
            "Current partition replica assignment",
            "",
            reassignment_json(current),
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
        ]
        if throttle > 0:
            lines += [
                "Warning: You must run `moldau cluster reassign verify` periodically, until the "
                "reassignment completes, to ensure the throttle is removed.",
                f"The inter-broker throttle limit was set to {throttle} B/s",
            ]
        if started:
            lines.append(f"Successfully started partition reassignments for {_names(started)}")
        lines += moves
        emit(
            {
                "current": reassignment_data(current),
                "started": [str(tp) for tp in sorted(started)],
                "log_dir_moves_started": [
                    {
                        "topic": replica.topic,
                        "partition": replica.partition,
                        "broker": replica.broker_id,
                        "log_dir": log_dir,
                    }
                    for replica, log_dir in sorted(plan.log_dirs.items())
                ]
                if moves
                else [],
                "throttle": throttle if throttle > 0 else None,
                "throttled_brokers": throttled[0],
                "throttled_topics": throttled[1],
            },
            output,
            "\n".join(lines),
        )
        if errors:
            fail(_refused(errors), ExitCode.KAFKA_ERROR)

    run(body())


@app.command("verify")
def verify(
    reassignment_file: ReassignmentFileOption,
    preserve_throttles: PreserveThrottlesOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Whether each partition is moved, and each replica placed in a named log dir; once all
    are, remove the throttles. Exit status: 0 all complete, 4 some still in progress, 1 some
    failed (cancelled or replaced)."""
    plan = _plan(reassignment_file)
    target = plan.replicas
    client = client_config(bootstrap, settings)

    async def body() -> int:
        async with AdminClient(client) as admin:
            current = await _current(admin, list(target))
            ongoing = await admin.list_partition_reassignments(list(target))
            statuses = {
                tp: progress(replicas, current.get(tp), reassigning=tp in ongoing)
                for tp, replicas in target.items()
            }
            moves = await verify_moves(admin, plan.log_dirs, set(ongoing)) if plan.log_dirs else []
            everything = [*statuses.values(), *(status for _, status, _ in moves)]
            cleared: tuple[list[int], list[str]] | None = None
            if not preserve_throttles and all(s == COMPLETE for s in everything):
                cleared = await _clear_throttles(admin, sorted({tp.topic for tp in target}))
        lines = ["Status of partition reassignment:"]
        for tp, status in sorted(statuses.items()):
            if status == FAILED:
                lines.append(
                    f"There is no active reassignment of partition {tp}, but replica set is "
                    f"{_replicas(current[tp])} rather than {_replicas(target[tp])}."
                )
            else:
                lines.append(STATUS_TEXT[status].format(tp=tp))
        lines += [line for _, _, line in moves]
        if cleared is not None:
            lines += ["", *_clearing_lines(*cleared)]
        emit(
            {
                "partitions": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "status": status,
                        "replicas": list(current[tp]),
                        "target_replicas": list(target[tp]),
                    }
                    for tp, status in sorted(statuses.items())
                ],
                "log_dirs": [
                    {
                        "topic": replica.topic,
                        "partition": replica.partition,
                        "broker": replica.broker_id,
                        "status": status,
                        "target_log_dir": plan.log_dirs[replica],
                    }
                    for replica, status, _ in moves
                ],
                "throttles_cleared": cleared is not None,
            },
            output,
            "\n".join(lines),
        )
        if FAILED in everything:
            return int(ExitCode.KAFKA_ERROR)
        if IN_PROGRESS in everything:
            return int(ExitCode.IN_PROGRESS)
        return int(ExitCode.OK)

    code = run(body())
    if code:
        raise typer.Exit(code)


def _replicas(replicas: Any) -> str:
    return "[" + ", ".join(str(r) for r in replicas) + "]"


@app.command("cancel")
def cancel(
    reassignment_file: ReassignmentFileOption,
    preserve_throttles: PreserveThrottlesOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Cancel the reassignments in progress of a JSON file's partitions, and the moves of its
    replicas between log dirs; remove the throttles."""
    plan = _plan(reassignment_file)
    target = plan.replicas
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await _current(admin, list(target))
            ongoing = await admin.list_partition_reassignments(list(target))
            results = (
                await admin.alter_partition_reassignments(dict.fromkeys(ongoing)) if ongoing else {}
            )
            cancelled = [tp for tp, error in results.items() if error is None]
            errors = {tp: error for tp, error in results.items() if error is not None}
            stopped = await cancel_moves(admin, plan.log_dirs) if plan.log_dirs else []
            cleared: tuple[list[int], list[str]] | None = None
            if not preserve_throttles:
                cleared = await _clear_throttles(admin, sorted({tp.topic for tp in target}))
        lines = []
        if cancelled:
            lines.append(f"Successfully cancelled partition reassignments for: {_names(cancelled)}")
        elif not errors:
            lines.append("None of the specified partition reassignments are active.")
        if stopped:
            lines.append(
                "Successfully cancelled log directory moves for: "
                + ",".join(f"{r.topic}-{r.partition} on broker {r.broker_id}" for r in stopped)
            )
        if cleared is not None:
            lines += _clearing_lines(*cleared)
        emit(
            {
                "cancelled": [str(tp) for tp in sorted(cancelled)],
                "cancelled_log_dir_moves": [
                    {"topic": r.topic, "partition": r.partition, "broker": r.broker_id}
                    for r in stopped
                ],
                "throttles_cleared": cleared is not None,
            },
            output,
            "\n".join(lines),
        )
        if errors:
            fail(_refused(errors), ExitCode.KAFKA_ERROR)

    run(body())


@app.command("list")
def list_reassignments(
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """The reassignments in progress: replicas, and which are being added or removed."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            ongoing = await admin.list_partition_reassignments()
        data = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(r.replicas),
                "adding_replicas": list(r.adding_replicas),
                "removing_replicas": list(r.removing_replicas),
            }
            for tp, r in ongoing.items()
        ]
        if ongoing:
            text = "Current partition reassignments:\n" + "\n".join(
                f"{tp}: replicas: {_join(r.replicas)}. adding: {_join(r.adding_replicas)}. "
                f"removing: {_join(r.removing_replicas)}."
                for tp, r in ongoing.items()
            )
        else:
            text = "No partition reassignments found."
        emit(data, output, text)

    run(body())


def _join(values: Any) -> str:
    return ",".join(str(v) for v in values)
