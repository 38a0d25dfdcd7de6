"""Where `moldau consume -o` starts, in kcat's syntax, and Kafka's reset-offsets durations.

beginning | end | stored      the log start, the log end, the group's committed offset
N                             absolute offset N
-N                            N records before the end of each partition
@TIMESTAMP                    first record at or after TIMESTAMP: milliseconds since the epoch
s@TIMESTAMP                   or an ISO-8601 date-time (2024-05-01T12:00:00Z), as kcat's s@
"""

from __future__ import annotations

import datetime
import enum
import re
from dataclasses import dataclass

__all__ = ["OffsetSpec", "SpecKind", "parse_datetime_ms", "parse_duration_ms", "parse_offset_spec"]


class SpecKind(enum.Enum):
    BEGINNING = "beginning"
    END = "end"
    STORED = "stored"
    OFFSET = "offset"
    FROM_END = "from_end"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    kind: SpecKind
    value: int = 0


def parse_datetime_ms(text: str) -> int:
    """Milliseconds since the epoch from digits or an ISO-8601 date-time (UTC if no zone)."""
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"'{text}' is neither milliseconds since the epoch nor an ISO date-time "
            "(example: 2024-05-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def parse_offset_spec(text: str) -> OffsetSpec:
    """Parse a `-o` value; raise ValueError saying what is accepted."""
    value = text.strip().lower()
    named = {
        "beginning": SpecKind.BEGINNING,
        "earliest": SpecKind.BEGINNING,
        "end": SpecKind.END,
        "latest": SpecKind.END,
        "stored": SpecKind.STORED,
    }
    if value in named:
        return OffsetSpec(named[value])
    if value.startswith(("@", "s@")):
        return OffsetSpec(SpecKind.TIMESTAMP, parse_datetime_ms(text.split("@", 1)[1]))
    if re.fullmatch(r"-\d+", value):
        return OffsetSpec(SpecKind.FROM_END, int(value[1:]))
    if re.fullmatch(r"\d+", value):
        return OffsetSpec(SpecKind.OFFSET, int(value))
    raise ValueError(f"offset '{text}' is not one of beginning, end, stored, N, -N or @TIMESTAMP")


_DURATION = re.compile(
    r"^(?P<sign>-)?P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Kafka's `--by-duration` takes it (PnDTnHnMnS) in milliseconds."""
    match = _DURATION.match(text.strip().upper())
    if not match or text.strip().upper() in ("P", "-P", "PT"):
        raise ValueError(f"duration '{text}' is not PnDTnHnMnS (example: PT1H30M, P2D)")
    total = (
        int(match["days"] or 0) * 86_400_000
        + int(match["hours"] or 0) * 3_600_000
        + int(match["minutes"] or 0) * 60_000
        + round(float(match["seconds"] or 0) * 1000)
    )
    return -total if match["sign"] else total
