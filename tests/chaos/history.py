"""The history of a chaos run: every client operation with its outcome, the faults, and the final
state read back after healing, one JSON object a line (the shape of a Jepsen history).

Operation kinds (`f`), each with `client`, `start` and `end` (seconds since the run began):

| f | fields | meaning |
| --- | --- | --- |
| `send` | topic, partition, value, outcome, offset (when ok), error | one record of a producer |
| `poll` | isolation, session, records [[topic, partition, offset, value]] | what a consumer read |
| `txn` | outcome, writes [[topic, partition, value]], reads [[topic, partition, offset, value]] | one transaction of a consume-transform-produce job |
| `commit` | group, offsets [[topic, partition, offset]], outcome | a group offset commit |
| `committed` | group, offsets [[topic, partition, offset]] | committed offsets read back (OffsetFetch) |
| `fault` | fault, nodes, phase (start, stop), offsets_s (a clock jump's, per node) | the nemesis |
| `disturbance` | fault, nodes, change | a leader, ISR or quorum leader change seen during a clock jump |
| `final` | isolation, topic, partition, records [[offset, value]] | a partition read whole after healing |
| `replicas` | topic, partition, high_watermark, digests {node: hex} | each replica's batches below the high watermark |
| `meta` | seed, scenario, schedule, settings | the run's identity |

Outcomes: `ok` (acknowledged), `failed` (certainly not applied), `unknown` (may or may not be:
a timeout, a connection lost with the request in flight).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

OK = "ok"
FAILED = "failed"
UNKNOWN = "unknown"
OUTCOMES = (OK, FAILED, UNKNOWN)

Operation = dict[str, Any]


class History:
    """Thread-safe recorder: clients on several threads append; each line is flushed at once so
    a run cut short still leaves everything it did on disk."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.operations: list[Operation] = []
        self._lock = threading.Lock()
        self._origin = time.monotonic()
        self._file = open(path, "w", encoding="utf-8") if path is not None else None  # noqa: SIM115

    def now(self) -> float:
        return round(time.monotonic() - self._origin, 4)

    def record(self, f: str, **fields: Any) -> Operation:
        operation: Operation = {"f": f, **fields}
        operation.setdefault("end", self.now())
        operation.setdefault("start", operation["end"])
        with self._lock:
            operation["index"] = len(self.operations)
            self.operations.append(operation)
            if self._file is not None:
                self._file.write(json.dumps(operation, separators=(",", ":")) + "\n")
                self._file.flush()
        return operation

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_history(path: Path) -> list[Operation]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def of_kind(history: Iterable[Operation], f: str) -> Iterator[Operation]:
    return (operation for operation in history if operation["f"] == f)
