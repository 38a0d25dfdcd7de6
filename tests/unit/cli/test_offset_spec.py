"""`consume -o` specs (kcat syntax) and reset-offsets durations and date-times."""

from __future__ import annotations

import pytest

from moldau.cli.offset_spec import (
    OffsetSpec,
    SpecKind,
    parse_datetime_ms,
    parse_duration_ms,
    parse_offset_spec,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("beginning", OffsetSpec(SpecKind.BEGINNING)),
        ("earliest", OffsetSpec(SpecKind.BEGINNING)),
        ("END", OffsetSpec(SpecKind.END)),
        ("stored", OffsetSpec(SpecKind.STORED)),
        ("0", OffsetSpec(SpecKind.OFFSET, 0)),
        ("1234", OffsetSpec(SpecKind.OFFSET, 1234)),
        ("-10", OffsetSpec(SpecKind.FROM_END, 10)),
        ("@1700000000000", OffsetSpec(SpecKind.TIMESTAMP, 1700000000000)),
        ("s@1700000000000", OffsetSpec(SpecKind.TIMESTAMP, 1700000000000)),
        ("@2023-11-14T22:13:20Z", OffsetSpec(SpecKind.TIMESTAMP, 1700000000000)),
    ],
)
def test_offset_specs(text: str, expected: OffsetSpec) -> None:
    assert parse_offset_spec(text) == expected


@pytest.mark.parametrize("text", ["", "start", "1.5", "--3", "@", "@yesterday", "+5"])
def test_bad_offset_specs_explain_the_choices(text: str) -> None:
    with pytest.raises(ValueError, match=r"beginning|ISO"):
        parse_offset_spec(text)


def test_datetime_without_zone_is_utc_and_offsets_are_honoured() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:01+01:00") == 1000
    assert parse_datetime_ms("2023-11-14T22:13:20.5Z") == 1700000000500


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("PT1H", 3_600_000),
        ("PT1H30M", 5_400_000),
        ("P2D", 172_800_000),
        ("P1DT2H3M4.5S", 93_784_500),
        ("-PT10S", -10_000),
    ],
)
def test_iso_durations(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["1h", "P", "PT", "T1H", "P1H"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="PnDTnHnMnS"):
        parse_duration_ms(text)
