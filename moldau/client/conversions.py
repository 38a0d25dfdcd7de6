"""Plain values from kio's typed fields: epoch milliseconds from datetimes, ints from timedeltas."""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["epoch_millis"]


def epoch_millis(value: Any) -> int:
    """Milliseconds since the epoch of a kio timestamp field (-1 for none)."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)
