"""What a decoder gives for a group of records: their column, and which of them it could not
decode and why (the first reason; `mode` decides whether that fails the task)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["Decoded", "describe"]


@dataclass(frozen=True, slots=True)
class Decoded:
    values: pa.Array  # null where a record is bad
    bad: pa.BooleanArray | None = None  # None: every record decoded
    reason: str = ""  # why the first bad record is bad

    @classmethod
    def all_bad(cls, kind: pa.DataType, count: int, reason: str) -> Decoded:
        return cls(pa.nulls(count, kind), pa.repeat(pa.scalar(True), count), reason)

    @classmethod
    def from_rows(cls, rows: list[Any], bad: list[bool], reason: str, kind: pa.DataType) -> Decoded:
        """A column built from Python values by pyarrow (in C, a value per record); a value
        that does not fit `kind` makes its record bad."""
        try:
            values = pa.array(rows, type=kind)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            for index, row in enumerate(rows):
                try:
                    pa.array([row], type=kind)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
                    reason = reason or f"does not fit {kind}: {describe(error)}"
                    rows[index], bad[index] = None, True
            values = pa.array(rows, type=kind)
        return cls(values, _mask(bad) if reason else None, reason)


def _mask(bad: Sequence[bool]) -> pa.BooleanArray:
    return pa.array(bad, type=pa.bool_())


def describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
