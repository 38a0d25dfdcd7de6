"""How the message browser shows bytes, and the lag history behind the group chart."""

from __future__ import annotations

from moldau.console.lag import LagHistory
from moldau.console.rendering import MAX_SHOWN_BYTES, RecordFormat, render_bytes


def test_auto_shows_json_documents_pretty_and_other_utf8_as_text() -> None:
    shown = render_bytes(b'{"a": [1, 2]}')
    assert shown.format is RecordFormat.json
    assert shown.text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render_bytes("héllo".encode()).format is RecordFormat.text
    assert render_bytes(b"42").format is RecordFormat.text  # a bare number stays text


def test_auto_shows_binary_as_hex_in_groups_of_two_bytes() -> None:
    shown = render_bytes(bytes(range(18)))
    assert shown.format is RecordFormat.hex
    assert shown.text == "0001 0203 0405 0607 0809 0a0b 0c0d 0e0f\n1011"


def test_null_stays_null() -> None:
    assert render_bytes(None).text is None


def test_a_view_that_does_not_fit_falls_back_and_says_why() -> None:
    assert render_bytes(b"\xff\xfe", RecordFormat.text).format is RecordFormat.hex
    assert render_bytes(b"\xff\xfe", RecordFormat.text).note == "not UTF-8"
    not_json = render_bytes(b"plain", RecordFormat.json)
    assert (not_json.format, not_json.note) == (RecordFormat.text, "not JSON")
    assert render_bytes(b"{}", RecordFormat.hex).text == "7b7d"


def test_deeply_nested_json_is_not_a_crash() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    shown = render_bytes(deep[:MAX_SHOWN_BYTES], RecordFormat.json)
    assert shown.format is RecordFormat.text
    assert render_bytes(deep[:MAX_SHOWN_BYTES]).format is RecordFormat.text


def test_long_values_are_cut_and_the_note_says_how_long_they_were() -> None:
    shown = render_bytes(b"x" * (MAX_SHOWN_BYTES + 10))
    assert shown.text is not None and len(shown.text) == MAX_SHOWN_BYTES
    assert shown.note == f"first {MAX_SHOWN_BYTES} of {MAX_SHOWN_BYTES + 10} bytes"
    # a cut through a multi-byte character still shows the text before it
    euro = "€".encode() * (MAX_SHOWN_BYTES // 3 + 1)
    assert render_bytes(euro, RecordFormat.text).format is RecordFormat.text


def test_lag_history_samples_at_most_once_a_second_and_forgets_old_groups() -> None:
    now = [1000.0]
    history = LagHistory(clock=lambda: now[0], max_samples=3, max_groups=2)
    history.record("g", 10)
    now[0] += 0.5
    assert [s.total_lag for s in history.record("g", 9)] == [10]
    for lag in (8, 7, 6):
        now[0] += 1
        history.record("g", lag)
    assert [s.total_lag for s in history.samples("g")] == [8, 7, 6]
    history.record("h", 1)
    history.record("i", 1)
    assert history.samples("g") == []  # the least recently looked at
