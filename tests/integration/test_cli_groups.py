"""`moldau consume -g` and `moldau group ...` against a real server (and kcat in the same group).

A group reads a topic to its end and commits; describe shows Kafka's columns with the lag; reset
offsets is a dry run until --execute; the offsets a CLI consumer commits are the ones librdkafka
resumes from.
"""

from __future__ import annotations

import pytest

from .support import unique_topic
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
