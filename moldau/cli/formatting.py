"""How `moldau consume` prints messages: kcat's `-f` format tokens, or JSON lines.

Tokens: %t topic, %p partition, %o offset, %k key, %K key length, %s value, %S value length,
%T timestamp (ms), %h headers (k=v,k=v), %% a percent sign; escapes \\n \\r \\t \\\\. A null key or
value prints as nothing and its length as -1 (as kcat does).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from moldau.client.message import Message

__all__ = ["message_json", "parse_format", "render", "unescape"]

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", "0": b"\0"}
_TOKENS = frozenset("tpokKsSTh%")


def unescape(text: str) -> bytes:
    """`text` as UTF-8 with the escapes \\n \\r \\t \\0 \\\\ turned into their bytes."""
    return b"".join(
        part for part in parse_format(text.replace("%", "%%")) if isinstance(part, bytes)
    )


def parse_format(text: str) -> list[bytes | str]:
    """Split a format into literal byte strings and one-letter tokens; raise ValueError on %x."""
    parts: list[bytes | str] = []
    literal = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in _ESCAPES:
            literal += _ESCAPES[text[index + 1]]
            index += 2
        elif char == "%":
            token = text[index + 1 : index + 2]
            if token not in _TOKENS:
                raise ValueError(
                    f"unknown format token '%{token}' (known: %t %p %o %k %K %s %S %T %h %%)"
                )
            if token == "%":
                literal += b"%"
            else:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(token)
            index += 2
        else:
            literal += char.encode("utf-8")
            index += 1
    if literal:
        parts.append(bytes(literal))
    return parts


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def render(parts: list[bytes | str], message: Message) -> bytes:
    out = bytearray()
    for part in parts:
        if isinstance(part, bytes):
            out += part
        elif part == "s":
            out += message.value() or b""
        elif part == "k":
            out += message.key() or b""
        elif part == "t":
            out += message.topic().encode()
        elif part == "p":
            out += str(message.partition()).encode()
        elif part == "o":
            out += str(message.offset()).encode()
        elif part == "T":
            out += str(message.timestamp()[1]).encode()
        elif part == "S":
            out += _length(message.value())
        elif part == "K":
            out += _length(message.key())
        elif part == "h":
            out += b",".join(
                key.encode() + b"=" + (value or b"") for key, value in message.headers()
            )
    return bytes(out)


def _text(data: bytes | None) -> Any:
    """UTF-8 text, or {"base64": ...} for bytes that are not UTF-8."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def message_data(message: Message) -> dict[str, Any]:
    """A record as data with stable field order: topic, partition, offset, timestamp, key, value,
    headers (a list of [key, value] pairs, keeping order and duplicates)."""
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": message.timestamp()[1],
        "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": [[key, _text(value)] for key, value in message.headers()],
    }


def message_json(message: Message, decoded: dict[str, Any] | None = None) -> str:
    """One JSON line (`message_data`); `decoded` replaces the key or value with the JSON data
    it was decoded to."""
    return json.dumps(message_data(message) | (decoded or {}), ensure_ascii=False)
