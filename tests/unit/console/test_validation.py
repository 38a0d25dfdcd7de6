"""What the console accepts from a user before anything reaches the cluster."""

from __future__ import annotations

import pytest

from moldau.console import validation
from moldau.console.validation import InvalidInput


@pytest.mark.parametrize("name", ["orders", "a", "A.b_c-9", "x" * 249, "..."])
def test_legal_topic_names_are_kept(name: str) -> None:
    assert validation.topic_name(f" {name} ") == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "required"),
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("x" * 250, "at most 249"),
        ("has space", "only letters"),
        ("<script>", "only letters"),
        ("a/b", "only letters"),
        ("naïve", "only letters"),
        ("a\x00b", "only letters"),
    ],
)
def test_illegal_topic_names_are_refused(name: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as raised:
        validation.topic_name(name)
    assert raised.value.field == "topic"


@pytest.mark.parametrize("raw", ["0", "-1", "10001", "1.5", "1e3", "three", "", "9" * 30])
def test_partition_counts_are_whole_numbers_from_one_to_ten_thousand(raw: str) -> None:
    with pytest.raises(InvalidInput):
        validation.partition_count(raw)


def test_counts_and_offsets_in_range_are_parsed() -> None:
    assert validation.partition_count("3") == 3
    assert validation.replication_factor(" 2 ") == 2
    assert validation.offset("0") == 0
    assert validation.offset(str(2**63 - 1)) == 2**63 - 1
    assert validation.partition("4", count=5) == 4
    assert validation.optional_partition("") is None
    assert validation.optional_partition("all") is None
    assert validation.browse_limit(None) == 50


@pytest.mark.parametrize("raw", ["-1", str(2**63), "0x10", "1_000"])
def test_offsets_outside_a_long_or_not_decimal_are_refused(raw: str) -> None:
    with pytest.raises(InvalidInput, match="offset"):
        validation.offset(raw)


def test_a_partition_the_topic_lacks_is_refused() -> None:
    with pytest.raises(InvalidInput, match="between 0 and 4"):
        validation.partition("5", count=5)


def test_browse_limits_are_bounded() -> None:
    with pytest.raises(InvalidInput):
        validation.browse_limit(str(validation.MAX_BROWSE_LIMIT + 1))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", 0),
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T22:13:20", 1_700_000_000_000),  # no zone: UTC
        ("2023-11-14 23:13:20+01:00", 1_700_000_000_000),
        ("2023-11-14", 1_699_920_000_000),
    ],
)
def test_timestamps_are_milliseconds_or_iso_8601(raw: str, expected: int) -> None:
    assert validation.timestamp_ms(raw) == expected


@pytest.mark.parametrize("raw", ["", "yesterday", "2023-13-01", "99999999999999999", "-5"])
def test_other_timestamps_are_refused(raw: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        validation.timestamp_ms(raw)
    assert raised.value.field == "timestamp"


def test_topic_configs_are_parsed_one_a_line_with_kafkas_types() -> None:
    text = "# a comment\nretention.ms=60000\n\ncleanup.policy = compact\n"
    assert validation.topic_configs(text) == {
        "retention.ms": "60000",
        "cleanup.policy": "compact",
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("retention.ms", "not name=value"),
        ("retention.mss=1", "not a topic config"),
        ("retention.ms=soon", "Not a number of type LONG"),
        ("cleanup.policy=shred", "cleanup.policy"),
        ("min.insync.replicas=0", "min.insync.replicas"),
        ("retention.ms=1\nretention.ms=2", "given twice"),
        ("retention.ms=1\x07", "control characters"),
    ],
)
def test_bad_topic_configs_are_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        validation.topic_configs(text)


def test_headers_are_name_value_lines() -> None:
    assert validation.headers("a=1\n\nb = two=2") == [("a", b"1"), ("b", b" two=2")]
    with pytest.raises(InvalidInput, match="not name=value"):
        validation.headers("=1")
    with pytest.raises(InvalidInput, match="at most"):
        validation.headers("\n".join(f"h{i}=v" for i in range(validation.MAX_HEADERS + 1)))


def test_group_ids_may_be_any_text_without_control_characters() -> None:
    assert validation.group_id("my group/with:odd?chars") == "my group/with:odd?chars"
    with pytest.raises(InvalidInput):
        validation.group_id("a\nb")
    with pytest.raises(InvalidInput):
        validation.group_id("")
