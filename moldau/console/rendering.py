"""How the message browser shows a key, a value or a header: as text, JSON or hex.

`auto` picks JSON for bytes that parse as a JSON object or array, text for other UTF-8 without
control characters (tab and line breaks aside), hex for the rest. A view asked for that does not fit the bytes (text of bytes that are not UTF-8, JSON
of bytes that do not parse) falls back to hex and says why in `note`. Long data is cut at
`MAX_SHOWN_BYTES` (the note says how much there was).
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_SHOWN_BYTES", "RecordFormat", "Rendered", "render_bytes"]

MAX_SHOWN_BYTES: Final = 16 * 1024
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class RecordFormat(enum.StrEnum):
    auto = "auto"
    text = "text"
    json = "json"
    hex = "hex"


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the page shows: `text` in the chosen `format` (None: the bytes were null)."""

    text: str | None
    format: RecordFormat
    size: int = 0
    note: str | None = None


def render_bytes(data: bytes | None, wanted: RecordFormat = RecordFormat.auto) -> Rendered:
    if data is None:
        return Rendered(None, wanted)
    size = len(data)
    shown = data[:MAX_SHOWN_BYTES]
    cut = f"first {MAX_SHOWN_BYTES} of {size} bytes" if size > MAX_SHOWN_BYTES else None
    decoded = _utf8(shown, cut=cut is not None)
    if wanted is RecordFormat.auto:
        if decoded is not None and cut is None and _is_json_document(decoded):
            return _as_json(decoded, size)
        if decoded is not None and not _CONTROL.search(decoded):
            return Rendered(decoded, RecordFormat.text, size, cut)
        return Rendered(_hex(shown), RecordFormat.hex, size, cut)
    if wanted is RecordFormat.json:
        if decoded is None:
            return Rendered(_hex(shown), RecordFormat.hex, size, _join("not UTF-8", cut))
        if cut is not None:
            return Rendered(decoded, RecordFormat.text, size, _join("too long to parse", cut))
        try:
            return _as_json(decoded, size)
        except ValueError:
            return Rendered(decoded, RecordFormat.text, size, "not JSON")
    if wanted is RecordFormat.text:
        if decoded is None:
            return Rendered(_hex(shown), RecordFormat.hex, size, _join("not UTF-8", cut))
        return Rendered(decoded, RecordFormat.text, size, cut)
    return Rendered(_hex(shown), RecordFormat.hex, size, cut)


def _utf8(data: bytes, *, cut: bool) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        # A cut may split the last character: what came before it still counts as text.
        if cut and error.start >= len(data) - 3 and error.reason == "unexpected end of data":
            return data[: error.start].decode("utf-8")
        return None


def _is_json_document(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _as_json(text: str, size: int) -> Rendered:
    try:
        document = json.loads(text)
        pretty = json.dumps(document, indent=2, ensure_ascii=False)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return Rendered(pretty, RecordFormat.json, size)


def _hex(data: bytes) -> str:
    """Sixteen bytes a line, in groups of two."""
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16].hex()
        lines.append(" ".join(chunk[i : i + 4] for i in range(0, len(chunk), 4)))
    return "\n".join(lines)


def _join(*parts: str | None) -> str:
    return "; ".join(part for part in parts if part)
