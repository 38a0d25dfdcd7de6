"""A response the dispatcher frames as it is: a body made of chunks, bytes and file regions sent
with zero copy (Fetch's records), for answers not encoded from a dict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Response:
    """A response body made of chunks: bytes, and file regions sent with zero copy."""

    chunks: list[Any]
