"""`moldau consume -g` and `moldau group ...` against a real server (and kcat in the same group).

A group reads a topic to its end and commits; describe shows Kafka's columns with the lag; reset
offsets is a dry run until --execute; the offsets a CLI consumer commits are the ones librdkafka
resumes from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from . import rdkafka
from .support import unique_topic, wait_until
from .test_cli_support import moldau, run_tool

pytestmark = pytest.mark.timeout(120)

COLUMNS = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(start, start + count))
    moldau("produce", topic, "-K", ":", bootstrap=bootstrap, stdin=lines)


def _committed(bootstrap: str, group: str) -> dict[int, int | None]:
    described = moldau("group", "describe", group, "--format", "json", bootstrap=bootstrap).json()
    return {row["partition"]: row["current_offset"] for row in described["partitions"]}


def test_group_consume_describe_reset_delete(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-group")
    group = unique_topic("g")
    moldau("topic", "create", topic, "-p", "3", bootstrap=b)
    _produce(b, topic, 0, 30)

    first = moldau("consume", topic, "-g", group, "-e", "-f", "%s\\n", bootstrap=b)
    assert sorted(first.text.splitlines()) == sorted(f"v{i}" for i in range(30))

    listed = moldau("group", "list", "--format", "json", bootstrap=b).json()
    assert group in [g["group_id"] for g in listed]
    assert group in moldau("group", "list", bootstrap=b).text.splitlines()

    _produce(b, topic, 30, 5)
    text = moldau("group", "describe", group, bootstrap=b).text
    lines = text.splitlines()
    assert lines[0].startswith(f"Consumer group '{group}' (") and lines[0].endswith("total lag 5")
    header = next(line for line in lines if line.startswith("GROUP"))
    assert header.split() == COLUMNS
    described = moldau("group", "describe", group, "--format", "json", bootstrap=b).json()
    assert described["total_lag"] == 5
    rows = described["partitions"]
    assert [r["partition"] for r in rows] == [0, 1, 2]
    assert sum(r["log_end_offset"] for r in rows) == 35
    assert sum(r["current_offset"] for r in rows) == 30
    assert all(r["lag"] == r["log_end_offset"] - r["current_offset"] for r in rows)

    plan = moldau(
        "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--format", "json",
        bootstrap=b,
    ).json()  # fmt: skip
    assert plan["executed"] is False
    assert [r["new_offset"] for r in plan["partitions"]] == [0, 0, 0]
    assert sum(v or 0 for v in _committed(b, group).values()) == 30  # dry run changed nothing

    executed = moldau(
        "group", "reset-offsets", group, "--topic", f"{topic}:0,1", "--to-earliest", "--execute",
        bootstrap=b,
    )  # fmt: skip
    assert executed.text.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    committed = _committed(b, group)
    assert (committed[0], committed[1]) == (0, 0)

    shifted = moldau(
        "group", "reset-offsets", group, "--all-topics", "--shift-by", "-1", "--execute",
        "--format", "json", bootstrap=b,
    ).json()  # fmt: skip
    assert {r["partition"]: r["new_offset"] for r in shifted["partitions"]}[0] == 0  # clamped

    again = moldau("consume", topic, "-g", group, "-e", "-f", "%p\\n", bootstrap=b)
    per_partition = {p: again.text.splitlines().count(str(p)) for p in range(3)}
    ends = {r["partition"]: r["log_end_offset"] for r in rows}
    assert per_partition[0] == ends[0] and per_partition[1] == ends[1]
    assert per_partition[2] == ends[2] - (committed[2] or 0) + 1

    deleted = moldau("group", "delete", group, bootstrap=b)
    assert deleted.text == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in moldau("group", "list", bootstrap=b).text.splitlines()


def test_kcat_resumes_from_offsets_the_cli_committed(server, kcat: str) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-kcat-group")
    group = unique_topic("shared")
    moldau("topic", "create", topic, "-p", "2", bootstrap=b)
    _produce(b, topic, 0, 10)
    moldau("consume", topic, "-g", group, "-e", "-n", "10", bootstrap=b)
    _produce(b, topic, 10, 4)
    output = run_tool(
        [kcat, "-b", b, "-G", group, "-e", "-q", "-f", "%s\\n", "-X", "auto.offset.reset=earliest",
         topic]
    )  # fmt: skip
    assert sorted(output.decode().splitlines()) == sorted(f"v{i}" for i in range(10, 14))


def test_unknown_group_is_a_one_line_error(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    result = moldau("group", "delete", unique_topic("never"), bootstrap=b, expect=1)
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def _members(bootstrap: str, group: str) -> dict[str, list[int]]:
    """client id -> owned partitions; empty while the group does not exist yet."""
    result = moldau(
        "group", "describe", group, "--format", "json", bootstrap=bootstrap, expect=None
    )
    if result.code != 0:
        assert "does not exist" in result.stderr, result.stderr
        return {}
    described = result.json()
    owners: dict[str, list[int]] = {}
    for row in described["partitions"]:
        if row["client_id"]:
            owners.setdefault(row["client_id"], []).append(row["partition"])
    return owners


def test_cli_and_kcat_share_a_group_and_reset_is_refused_while_active(  # type: ignore[no-untyped-def]
    server, kcat: str
) -> None:
    b = server.bootstrap_servers
    topic = unique_topic("cli-shared-group")
    group = unique_topic("mixed")
    moldau("topic", "create", topic, "-p", "3", bootstrap=b)
    _produce(b, topic, 0, 6)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MOLDAU_")}
    cli = subprocess.Popen(
        [sys.executable, "-m", "moldau", "consume", topic, "-g", group, "-b", b,
         "-X", "heartbeat.interval.ms=200"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment,
    )  # fmt: skip
    librdkafka = None
    try:
        wait_until(
            lambda: _members(b, group) == {"moldau-cli": [0, 1, 2]},
            timeout=30,
            message="the CLI consumer never owned all three partitions",
        )
        librdkafka = subprocess.Popen(
            [kcat, "-b", b, "-G", group, "-q", "-X", "client.id=kcat", "-X",
             "partition.assignment.strategy=range", topic],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(
            lambda: sorted(map(len, _members(b, group).values())) == [1, 2],
            timeout=60,
            message="the group never split the partitions between the CLI and kcat",
        )
        owners = _members(b, group)
        assert set(owners) == {"moldau-cli", "kcat"}
        assert sorted(owners["moldau-cli"] + owners["kcat"]) == [0, 1, 2]

        refused = moldau(
            "group", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute",
            bootstrap=b, expect=1,
        )  # fmt: skip
        assert "inactive" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        for process in (librdkafka, cli):
            if process is not None:
                process.send_signal(signal.SIGINT)
        for process in (librdkafka, cli):
            if process is not None:
                process.wait(20)
    assert cli.returncode == 130, cli.stderr.read() if cli.stderr else ""


def test_group_offset_wins_and_o_says_where_a_group_without_one_starts(server) -> None:  # type: ignore[no-untyped-def]
    """kafka-console-consumer --group G [--from-beginning]: auto.offset.reset, not a refusal."""
    b = server.bootstrap_servers
    topic = unique_topic("cli-group-reset")
    moldau("topic", "create", topic, "-p", "2", bootstrap=b)
    _produce(b, topic, 0, 6)

    from_end = unique_topic("g-end")
    assert moldau("consume", topic, "-g", from_end, "-o", "end", "-e", bootstrap=b).stdout == b""
    from_start = unique_topic("g-start")
    first = moldau("consume", topic, "-g", from_start, "-o", "beginning", "-e", "-f", "%s\\n",
                   bootstrap=b)  # fmt: skip
    assert sorted(first.text.splitlines()) == [f"v{i}" for i in range(6)]

    _produce(b, topic, 6, 2)
    for group in (from_end, from_start):  # both have committed offsets now: those win over -o
        again = moldau("consume", topic, "-g", group, "-o", "beginning", "-e", "-f", "%s\\n",
                       bootstrap=b)  # fmt: skip
        assert sorted(again.text.splitlines()) == ["v6", "v7"]

    refused = moldau("consume", topic, "-g", unique_topic("g"), "-o", "3", bootstrap=b, expect=2)
    assert refused.stderr == (
        "error: with -g a partition starts at the group's committed offset, or with -o beginning | "
        "end where it has none; move the offsets with `moldau group reset-offsets`\n"
    )


def test_describe_views_see_a_kip_848_group_and_reset_seeds_a_new_group(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-848")
    moldau("topic", "create", topic, "-p", "2", bootstrap=b)
    _produce(b, topic, 0, 4)

    seeded = unique_topic("seeded")  # no such group yet: Kafka's tool seeds its offsets
    moldau("group", "reset-offsets", seeded, "--topic", topic, "--to-offset", "1", "--execute",
           bootstrap=b)  # fmt: skip
    assert _committed(b, seeded) == {0: 1, 1: 1}

    group = unique_topic("kip848")
    consumer = rdkafka.consumer(b, **{"group.id": group, "group.protocol": "consumer"})
    try:
        consumer.subscribe([topic])
        wait_until(
            lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2,
            timeout=30,
            message="the KIP-848 consumer never owned both partitions",
        )
        described = moldau("group", "describe", group, "--members", "--format", "json",
                           bootstrap=b).json()  # fmt: skip
        assert described["state"] == "Stable"
        [member] = described["members"]
        assert member["partitions"] == 2
        state = moldau("group", "describe", group, "--state", bootstrap=b).text.splitlines()
        assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY",
                                    "STATE", "#MEMBERS"]  # fmt: skip
        assert state[1].split()[0] == group and state[1].split()[-2:] == ["Stable", "1"]
        members = moldau("group", "describe", group, "--members", bootstrap=b).text.splitlines()
        assert members[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[1].split()[-1] == "2"

        everything = moldau("group", "describe", "--all-groups", "--format", "json",
                            bootstrap=b).json()  # fmt: skip
        assert {group, seeded} <= {g["group"] for g in everything}
    finally:
        consumer.close()
