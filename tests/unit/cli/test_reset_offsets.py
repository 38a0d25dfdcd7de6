"""Where `moldau group reset-offsets` moves each partition (Kafka's targets and clamping)."""

from __future__ import annotations

import pytest

from moldau.cli.group import ResetTarget, describe_rows, new_offset, parse_topic_scope
from moldau.client.admin import GroupDescription, MemberDescription
from moldau.types import TopicPartition as TP


def _new(target: ResetTarget, current: int = 50, found: int | None = None) -> int:
    return new_offset(
        target, current=current, log_start_offset=10, log_end_offset=100, offset_for_timestamp=found
    )


def test_earliest_latest_and_current() -> None:
    assert _new(ResetTarget("earliest")) == 10
    assert _new(ResetTarget("latest")) == 100
    assert _new(ResetTarget("current")) == 50


def test_offsets_are_clamped_to_the_log() -> None:
    assert _new(ResetTarget("offset", 5)) == 10
    assert _new(ResetTarget("offset", 500)) == 100
    assert _new(ResetTarget("offset", 42)) == 42


def test_shift_moves_from_the_committed_offset_and_clamps() -> None:
    assert _new(ResetTarget("shift", -20)) == 30
    assert _new(ResetTarget("shift", -1000)) == 10
    assert _new(ResetTarget("shift", 1000)) == 100


def test_timestamp_without_a_match_goes_to_the_end() -> None:
    assert _new(ResetTarget("timestamp", 123), found=77) == 77
    assert _new(ResetTarget("timestamp", 123), found=-1) == 100


def test_topic_scope_syntax() -> None:
    assert parse_topic_scope("orders") == ("orders", None)
    assert parse_topic_scope("orders:0,2") == ("orders", [0, 2])
    with pytest.raises(ValueError, match="TOPIC:P,P,P"):
        parse_topic_scope("orders:a")


def test_describe_rows_join_offsets_owners_and_lag() -> None:
    member = MemberDescription("m-1", "client-1", "/127.0.0.1", None, (TP("t", 0),))
    group = GroupDescription("g", "Stable", "consumer", "range", (member,), 1)
    rows = describe_rows(group, {TP("t", 0): 5, TP("t", 1): 7}, {TP("t", 0): 9, TP("t", 1): 7})
    assert rows == [
        {
            "group": "g",
            "topic": "t",
            "partition": 0,
            "current_offset": 5,
            "log_end_offset": 9,
            "lag": 4,
            "consumer_id": "m-1",
            "host": "/127.0.0.1",
            "client_id": "client-1",
        },
        {
            "group": "g",
            "topic": "t",
            "partition": 1,
            "current_offset": 7,
            "log_end_offset": 7,
            "lag": 0,
            "consumer_id": None,
            "host": None,
            "client_id": None,
        },
    ]


def test_assigned_partition_without_commit_has_no_lag() -> None:
    member = MemberDescription("m-1", "c", "h", None, (TP("t", 0),))
    group = GroupDescription("g", "Stable", "consumer", "range", (member,), 1)
    (row,) = describe_rows(group, {}, {TP("t", 0): 3})
    assert (row["current_offset"], row["lag"]) == (None, None)
