"""Offsets as Spark's Kafka source writes them: JSON `{"topic": {"partition": offset}}`.

`PartitionOffsets` is the in-memory form (`{TopicPartition: offset}`); `offsets_to_json` /
`offsets_from_json` convert it to and from the plain dicts Spark keeps in its checkpoint.
`OffsetSpec` is what the user asked for (`earliest`, `latest`, per-partition offsets with -2/-1,
timestamps) before the cluster is asked; `parse_partition_json` reads the per-partition JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from moldau.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "PartitionOffsets",
    "offsets_from_json",
    "offsets_to_json",
    "parse_partition_json",
]

LATEST: Final = -1
EARLIEST: Final = -2

PartitionOffsets = dict[TopicPartition, int]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """`{"topic": {"0": 12}}`, topics and partitions in order (the checkpoint stays readable)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(data: Mapping[str, Any] | str) -> PartitionOffsets:
    """Inverse of `offsets_to_json`; also accepts the JSON text."""
    parsed: Mapping[str, Any] = json.loads(data) if isinstance(data, str) else data
    offsets: PartitionOffsets = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"offsets for topic {topic!r} must be an object, got {partitions!r}")
        for partition, offset in partitions.items():
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets


def parse_partition_json(text: str, *, option: str) -> PartitionOffsets:
    """`{"topicA":{"0":23,"1":-1}}` from an option, with an error that names the option."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError
        parsed = offsets_from_json(data)
    except (ValueError, TypeError):
        raise ValueError(
            f'option \'{option}\' must be JSON like {{"topicA":{{"0":23,"1":-1}}}}, got {text!r}'
        ) from None
    return parsed


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSpec:
    """Where to start or end: a default, per-partition offsets, or timestamps.

    Per-partition `offsets` may hold -2 (earliest) and -1 (latest); partitions not named use
    `default`. `global_timestamp` applies to every partition, `timestamps` to the named ones.
    """

    default: int = LATEST
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    global_timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] | None = None

    @property
    def by_timestamp(self) -> bool:
        return self.global_timestamp is not None or self.timestamps is not None

    def all_values(self) -> Iterator[int]:
        if not self.by_timestamp:
            yield self.default
            yield from self.offsets.values()

    def request_for(self, tp: TopicPartition) -> int | None:
        """The ListOffsets spec for `tp`: -2, -1, a timestamp, or None for an absolute offset."""
        if self.global_timestamp is not None:
            return self.global_timestamp
        if self.timestamps is not None:
            if tp not in self.timestamps:
                raise ValueError(f"no timestamp given for partition {tp} (it is being read)")
            return self.timestamps[tp]
        offset = self.offsets.get(tp, self.default)
        return offset if offset < 0 else None

    def absolute(self, tp: TopicPartition) -> int | None:
        if self.by_timestamp:
            return None
        offset = self.offsets.get(tp, self.default)
        return offset if offset >= 0 else None
