"""The partition logs of a node and where they live (Kafka's `LogManager.currentLogs` and its
logs to be deleted), shared by `LogManager` and its log-dir moves (`log_dir_moves.py`).

`lock` guards every field; it is taken before a log's own lock, never after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.storage.partition_log import PartitionLog
    from moldau.types import TopicPartition

__all__ = ["LogRegistry"]


class LogRegistry:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.log_dir_of: dict[TopicPartition, str] = {}  # the log dir each log is in
        self.unopened: dict[TopicPartition, str] = {}  # found at start-up, failed to open
        # (due, what closes its files, directory): a deleted or moved partition's directory,
        # removed after file.delete.delay.ms so that reads in flight finish from its files
        self.pending_directory_deletes: list[tuple[int, Callable[[], None], str]] = []

    def retire_directory(self, due: int, close_files: Callable[[], None], path: str) -> None:
        with self.lock:
            self.pending_directory_deletes.append((due, close_files, path))

    def take_retired_directories(
        self, now: int | None = None
    ) -> list[tuple[int, Callable[[], None], str]]:
        """The retired directories due by `now` (all of them without it), forgotten here."""
        with self.lock:
            pending = self.pending_directory_deletes
            due = [item for item in pending if now is None or item[0] <= now]
            self.pending_directory_deletes = [
                item for item in pending if now is not None and item[0] > now
            ]
            return due
