"""SCRAM credentials as kafka-storage and kafka-configs write them on the command line:

    SCRAM-SHA-512=[name=alice,password=alice-secret]                       (storage format)
    SCRAM-SHA-256=[iterations=8192,password=alice-secret]                  (user set)
    SCRAM-SHA-512=[name=bob,iterations=8192,salt="<base64>",saltedpassword="<base64>"]

`password` (with an optional `salt`), or `salt` and `saltedpassword`; `iterations` from 4096
(the default) to 16384; values may be double-quoted (a quoted value may hold commas).
`parse_scram_setting(text)` returns the salted form the metadata log and
AlterUserScramCredentials take, or raises `ScramSettingError` naming what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass, field

from moldau.protocol.sasl.scram import HASHES, MAX_ITERATIONS, MIN_ITERATIONS, salted_password

_KEYS = ("name", "password", "iterations", "salt", "saltedpassword")


class ScramSettingError(ValueError):
    """A SCRAM setting that does not parse."""


@dataclass(frozen=True, slots=True)
class ScramSetting:
    mechanism: str
    name: str | None
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


def parse_scram_setting(text: str) -> ScramSetting:
    mechanism, equals, rest = text.partition("=")
    mechanism = mechanism.strip().upper()
    if not equals or mechanism not in HASHES:
        raise ScramSettingError(
            f"{text!r}: expected SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...] "
            "(for example SCRAM-SHA-512=[name=alice,password=alice-secret])"
        )
    rest = rest.strip()
    if not (rest.startswith("[") and rest.endswith("]")):
        raise ScramSettingError(f"{text!r}: the settings go in [brackets]")
    values: dict[str, str] = {}
    for item in _split(rest[1:-1], text):
        key, equals, value = item.partition("=")
        key = key.strip().lower()
        if not equals or key not in _KEYS:
            raise ScramSettingError(f"{text!r}: unknown setting {item!r} ({', '.join(_KEYS)})")
        values[key] = value.strip().strip('"')
    try:
        iterations = int(values.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise ScramSettingError(f"{text!r}: iterations is not a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramSettingError(
            f"{text!r}: iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    salt = _base64(values["salt"], "salt", text) if "salt" in values else None
    if "password" in values and "saltedpassword" in values:
        raise ScramSettingError(f"{text!r}: give password or saltedpassword, not both")
    if "password" in values:
        salt = salt if salt is not None else secrets.token_bytes(32)
        salted = salted_password(mechanism, values["password"].encode(), salt, iterations)
    elif "saltedpassword" in values and salt is not None:
        salted = _base64(values["saltedpassword"], "saltedpassword", text)
    else:
        raise ScramSettingError(f"{text!r}: give password=..., or salt=... and saltedpassword=...")
    return ScramSetting(mechanism, values.get("name") or None, iterations, salt, salted)


def _split(text: str, whole: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    if quoted:
        raise ScramSettingError(f"{whole!r}: a quote is not closed")
    items.append("".join(current))
    return [item for item in items if item.strip()]


def _base64(value: str, key: str, text: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramSettingError(f"{text!r}: {key} is not base64") from None
