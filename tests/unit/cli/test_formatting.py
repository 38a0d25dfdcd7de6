"""kcat's format tokens and the default JSON lines of `moldau consume`."""

from __future__ import annotations

import json

import pytest

from moldau.cli.formatting import message_json, parse_format, render, unescape
from moldau.client.message import Message


def _message(key: bytes | None = b"k1", value: bytes | None = b"hello") -> Message:
    return Message(
        topic="orders",
        partition=2,
        offset=41,
        key=key,
        value=value,
        headers=(("a", b"1"), ("b", None)),
        timestamp=1700000000123,
    )


def test_every_token_renders_its_field() -> None:
    parts = parse_format("%t|%p|%o|%k|%K|%s|%S|%T|%h|%%\\n")
    assert render(parts, _message()) == b"orders|2|41|k1|2|hello|5|1700000000123|a=1,b=|%\n"


def test_null_key_and_value_print_nothing_and_length_minus_one() -> None:
    parts = parse_format("[%k][%K][%s][%S]")
    assert render(parts, _message(key=None, value=None)) == b"[][-1][][-1]"


def test_escapes_and_literal_text() -> None:
    assert render(parse_format("v=%s\\t\\\\end\\r\\n"), _message()) == b"v=hello\t\\end\r\n"


def test_binary_values_are_written_unchanged() -> None:
    assert render(parse_format("%s"), _message(value=b"\xff\x00\x01")) == b"\xff\x00\x01"


def test_unknown_token_is_rejected_with_the_list_of_tokens() -> None:
    with pytest.raises(ValueError, match="unknown format token '%x'"):
        parse_format("%x")


def test_json_line_has_stable_fields_and_keeps_header_order() -> None:
    line = message_json(_message())
    assert list(json.loads(line)) == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
    ]
    assert json.loads(line) == {
        "topic": "orders",
        "partition": 2,
        "offset": 41,
        "timestamp": 1700000000123,
        "key": "k1",
        "value": "hello",
        "headers": [["a", "1"], ["b", None]],
    }


def test_json_line_marks_bytes_that_are_not_utf8() -> None:
    data = json.loads(message_json(_message(key=None, value=b"\xff\xfe")))
    assert data["key"] is None
    assert data["value"] == {"base64": "//4="}


def test_delimiters_unescape_to_bytes_and_keep_utf8() -> None:
    assert unescape("\\n") == b"\n"
    assert unescape("\\t|\\\\") == b"\t|\\"
    assert unescape("é") == "é".encode()
    assert unescape("50%") == b"50%"
