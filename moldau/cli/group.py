"""`moldau group list | describe | delete | reset-offsets` (as kafka-consumer-groups.sh).

describe prints Kafka's columns `GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID` after a line with the group's total lag. reset-offsets takes Kafka's
scopes (`--topic T[:P,P]`, `--all-topics`) and targets (`--to-earliest`, `--to-latest`,
`--to-current`, `--to-offset`, `--shift-by`, `--to-datetime`, `--by-duration`); it only shows the
plan unless `--execute` is given, and like Kafka refuses a group that has active members.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
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
    plain_table,
    run,
    stderr,
)
from moldau.cli.offset_spec import parse_datetime_ms, parse_duration_ms
from moldau.client.admin import AdminClient, GroupDescription
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.offsets import EARLIEST, LATEST
from moldau.types import TopicPartition

app = typer.Typer(help="Inspect consumer groups and move their offsets.", no_args_is_help=True)

DESCRIBE_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


@app.command("list")
def list_groups(
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Group ids, one per line."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            groups = await admin.list_groups()
        data = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "state": g.state,
                "type": g.group_type,
            }
            for g in groups
        ]
        emit(data, output, "\n".join(g.group_id for g in groups))

    run(body())


def describe_rows(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_end_offsets: Mapping[TopicPartition, int],
) -> list[dict[str, Any]]:
    """One row per partition that is assigned or has a committed offset, in Kafka's columns."""
    owners = {tp: member for member in description.members for tp in member.assignment}
    rows = []
    for tp in sorted(set(owners) | {tp for tp, o in committed.items() if o >= 0}):
        current = committed.get(tp, -1)
        end = log_end_offsets.get(tp)
        member = owners.get(tp)
        rows.append(
            {
                "group": description.group_id,
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": current if current >= 0 else None,
                "log_end_offset": end,
                "lag": (end - current) if current >= 0 and end is not None else None,
                "consumer_id": member.member_id if member else None,
                "host": member.host if member else None,
                "client_id": member.client_id if member else None,
            }
        )
    return rows


MEMBERS_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_COLUMNS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


async def _description(admin: AdminClient, group_id: str) -> GroupDescription | None:
    """The group, classic or KIP-848; None when the coordinator knows no such group."""
    try:
        return (await admin.describe_groups([group_id]))[0]
    except KafkaException as exc:
        if exc.code is ErrorCode.group_id_not_found:
            return None
        raise


def _offsets_view(
    group_id: str, description: GroupDescription, rows: list[dict[str, Any]]
) -> tuple[dict[str, Any], str]:
    total_lag = sum(row["lag"] or 0 for row in rows)
    data = {
        "group": group_id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "coordinator": description.coordinator,
        "members": len(description.members),
        "total_lag": total_lag,
        "partitions": rows,
    }
    header = (
        f"Consumer group '{group_id}' ({description.state}, "
        f"{len(description.members)} members) has total lag {total_lag}"
    )
    if not description.members:
        header += f"\nConsumer group '{group_id}' has no active members."
    table = plain_table(DESCRIBE_COLUMNS, [tuple(r.values()) for r in rows])
    return data, f"{header}\n\n{table}"


def _members_view(group_id: str, description: GroupDescription) -> tuple[dict[str, Any], str]:
    members = [
        {
            "consumer_id": m.member_id,
            "host": m.host,
            "client_id": m.client_id,
            "partitions": len(m.assignment),
            "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
        }
        for m in description.members
    ]
    data = {"group": group_id, "state": description.state, "members": members}
    if not members:
        return data, f"Consumer group '{group_id}' has no active members."
    table = plain_table(
        MEMBERS_COLUMNS,
        [(group_id, m["consumer_id"], m["host"], m["client_id"], m["partitions"]) for m in members],
    )
    return data, table


def _state_view(
    group_id: str, description: GroupDescription, coordinator: str
) -> tuple[dict[str, Any], str]:
    data = {
        "group": group_id,
        "coordinator": description.coordinator,
        "coordinator_address": coordinator,
        "assignment_strategy": description.protocol,
        "state": description.state,
        "members": len(description.members),
    }
    row = (
        group_id,
        f"{coordinator} ({description.coordinator})",
        description.protocol or None,
        description.state,
        len(description.members),
    )
    return data, plain_table(STATE_COLUMNS, [row])


@app.command("describe")
def describe(
    groups: Annotated[
        list[str] | None, typer.Argument(help="Group ids.", show_default=False)
    ] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Describe every group.")] = False,
    offsets: Annotated[
        bool,
        typer.Option("--offsets", help="Offsets and lag per partition (the default view)."),
    ] = False,
    members: Annotated[
        bool, typer.Option("--members", help="The members and how many partitions each owns.")
    ] = False,
    state: Annotated[
        bool,
        typer.Option("--state", help="Coordinator, assignment strategy, state, member count."),
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Offsets, lag and owners of each partition of the groups (as kafka-consumer-groups
    --describe; --members and --state are its other views). Classic and KIP-848 groups."""
    if bool(groups) == all_groups:
        fail("name the groups to describe, or give --all-groups")
    if offsets + members + state > 1:
        fail("give at most one of --offsets, --members, --state")
    client = client_config(bootstrap, settings)

    async def body() -> None:
        results = []
        texts = []
        async with AdminClient(client) as admin:
            names = groups or [g.group_id for g in await admin.list_groups()]
            for group_id in names:
                description = await _description(admin, group_id)
                committed = await admin.list_consumer_group_offsets(group_id)
                if description is None:
                    if not any(o >= 0 for o in committed.values()):
                        fail(
                            f"consumer group '{group_id}' does not exist; list groups with "
                            "`moldau group list`",
                            ExitCode.KAFKA_ERROR,
                        )
                    description = GroupDescription(group_id, "Empty", "consumer", "", (), -1)
                if members:
                    data, text = _members_view(group_id, description)
                elif state:
                    broker = admin.cluster.metadata.brokers.get(description.coordinator)
                    address = broker.address if broker else "-"
                    data, text = _state_view(group_id, description, address)
                else:
                    owned = {tp for m in description.members for tp in m.assignment}
                    partitions = sorted(owned | {tp for tp, o in committed.items() if o >= 0})
                    ends = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
                    rows = describe_rows(
                        description, committed, {tp: r.offset for tp, r in ends.items()}
                    )
                    if description.state == "Dead" and not rows:
                        fail(
                            f"consumer group '{group_id}' does not exist; list groups with "
                            "`moldau group list`",
                            ExitCode.KAFKA_ERROR,
                        )
                    data, text = _offsets_view(group_id, description, rows)
                results.append(data)
                texts.append(text)
        one = groups is not None and len(groups) == 1
        emit(results[0] if one else results, output, "\n\n".join(texts))

    run(body())


@app.command("delete")
def delete(
    groups: Annotated[list[str], typer.Argument(help="Group ids.", show_default=False)],
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Delete groups (they must have no active members)."""
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            await admin.delete_groups(groups)
        names = ", ".join(f"'{g}'" for g in groups)
        emit(
            {"deleted": groups},
            output,
            f"Deletion of requested consumer groups ({names}) was successful.",
        )

    run(body())


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """What reset-offsets moves to: kind is earliest, latest, current, offset, shift, timestamp."""

    kind: str
    value: int = 0


def new_offset(
    target: ResetTarget,
    *,
    current: int,
    log_start_offset: int,
    log_end_offset: int,
    offset_for_timestamp: int | None = None,
) -> int:
    """The offset a partition is reset to, clamped to [log start, log end] as Kafka does."""
    if target.kind == "earliest":
        wanted = log_start_offset
    elif target.kind == "latest":
        wanted = log_end_offset
    elif target.kind == "current":
        wanted = current if current >= 0 else log_end_offset
    elif target.kind == "offset":
        wanted = target.value
    elif target.kind == "shift":
        wanted = (current if current >= 0 else log_end_offset) + target.value
    elif target.kind == "timestamp":
        wanted = (
            log_end_offset
            if offset_for_timestamp is None or offset_for_timestamp < 0
            else offset_for_timestamp
        )
    else:
        raise ValueError(f"unknown reset target {target.kind}")
    return min(max(wanted, log_start_offset), log_end_offset)


def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    """`topic` or `topic:0,1,2` (Kafka's --topic syntax)."""
    name, separator, partitions = text.partition(":")
    if not separator:
        return name, None
    try:
        return name, [int(p) for p in partitions.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"--topic '{text}' is not TOPIC or TOPIC:P,P,P") from None


def _target(
    to_earliest: bool,
    to_latest: bool,
    to_current: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
) -> ResetTarget:
    chosen = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-current", to_current),
            ("--to-offset", to_offset is not None),
            ("--shift-by", shift_by is not None),
            ("--to-datetime", to_datetime is not None),
            ("--by-duration", by_duration is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        fail(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            f"--shift-by, --to-datetime, --by-duration (got {len(chosen)})"
        )
    try:
        if to_earliest:
            return ResetTarget("earliest")
        if to_latest:
            return ResetTarget("latest")
        if to_current:
            return ResetTarget("current")
        if to_offset is not None:
            return ResetTarget("offset", to_offset)
        if shift_by is not None:
            return ResetTarget("shift", shift_by)
        if to_datetime is not None:
            return ResetTarget("timestamp", parse_datetime_ms(to_datetime))
        assert by_duration is not None
        return ResetTarget("timestamp", int(time.time() * 1000) - parse_duration_ms(by_duration))
    except ValueError as exc:
        fail(str(exc))


@app.command("reset-offsets")
def reset_offsets(
    group: Annotated[str, typer.Argument(help="Group id.", show_default=False)],
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="TOPIC or TOPIC:P,P (repeatable)."),
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has offsets for.")
    ] = False,
    to_earliest: Annotated[
        bool, typer.Option("--to-earliest", help="The log start offset.")
    ] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="The log end offset.")] = False,
    to_current: Annotated[
        bool, typer.Option("--to-current", help="The committed offset (no change).")
    ] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", help="This offset (clamped to the log).")
    ] = None,
    shift_by: Annotated[
        int | None,
        typer.Option("--shift-by", help="The committed offset plus N (N may be negative)."),
    ] = None,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="ISO date-time, e.g. 2024-05-01T12:00:00")
    ] = None,
    by_duration: Annotated[
        str | None, typer.Option("--by-duration", help="ISO duration back from now, e.g. PT1H")
    ] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the plan.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show the plan (default).")
    ] = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Move a group's committed offsets; a dry run unless --execute."""
    if bool(topic) == all_topics:
        fail("give the scope: --topic TOPIC[:P,P] (repeatable) or --all-topics")
    if execute and dry_run:
        fail("--execute and --dry-run exclude each other")
    target = _target(
        to_earliest, to_latest, to_current, to_offset, shift_by, to_datetime, by_duration
    )
    try:
        scopes = [parse_topic_scope(t) for t in topic or ()]
    except ValueError as exc:
        fail(str(exc))
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            # A group that does not exist yet gets its offsets seeded, as Kafka's tool does.
            description = await _description(admin, group)
            if description is not None and description.members:
                fail(
                    f"assignments can only be reset if the group '{group}' is inactive, but the "
                    f"current state is {description.state}; stop its consumers first",
                    ExitCode.KAFKA_ERROR,
                )
            committed = await admin.list_consumer_group_offsets(group)
            partitions: list[TopicPartition] = []
            if all_topics:
                partitions = [tp for tp, o in committed.items() if o >= 0]
            for name, wanted in scopes:
                info = await admin.describe_topic(name)
                for p in wanted if wanted is not None else list(info.partitions):
                    if p not in info.partitions:
                        fail(
                            f"topic '{name}' has no partition {p} (it has {len(info.partitions)})",
                            ExitCode.KAFKA_ERROR,
                        )
                    partitions.append(TopicPartition(name, p))
            partitions = sorted(set(partitions))
            starts = await admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
            ends = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
            by_time: dict[TopicPartition, int] = {}
            if target.kind == "timestamp":
                found = await admin.list_offsets(dict.fromkeys(partitions, target.value))
                by_time = {tp: r.offset for tp, r in found.items()}
            plan = {
                tp: new_offset(
                    target,
                    current=committed.get(tp, -1),
                    log_start_offset=starts[tp].offset,
                    log_end_offset=ends[tp].offset,
                    offset_for_timestamp=by_time.get(tp),
                )
                for tp in partitions
            }
            if execute and plan:
                await admin.alter_consumer_group_offsets(group, plan)
        rows = [
            {"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
            for tp, o in plan.items()
        ]
        table = plain_table(
            RESET_COLUMNS, [(r["group"], r["topic"], r["partition"], r["new_offset"]) for r in rows]
        )
        if not execute and not dry_run:
            stderr.print(
                "Dry run: nothing changed; add --execute to apply (or --dry-run to say so)."
            )
        emit({"group": group, "executed": execute, "partitions": rows}, output, table)

    run(body())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="group")
