"""When and how a node snapshots its metadata image (Kafka's SnapshotGenerator, KIP-630/KIP-876).

Every node (voter or observer) counts the bytes of the entries committed after its latest
snapshot. A snapshot is due once they reach `metadata.log.max.record.bytes.between.snapshots`
(20 MiB), or once the oldest of them was committed `metadata.log.max.snapshot.interval.ms`
(1 h; 0: never) ago. Kafka measures the interval from the records' append time; Moldau's log
entries carry none, so the clock starts when this node commits them (after a restart, when it
replays them). One snapshot is written at a time: the image (immutable) as of the last offset
replayed is encoded and stored in a worker thread of its own (so that the metadata log's fsyncs
never wait behind it), then, on the loop, the log is trimmed to it. A snapshot installed from
the leader meanwhile makes it moot: the log already starts past it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable

from moldau.clock import Clock
from moldau.metadata.image import MetadataImage
from moldau.metadata.snapshot import encode_snapshot
from moldau.raft.driver import RaftDriver
from moldau.raft.log import OffsetAndEpoch

logger = logging.getLogger(__name__)

MAX_BYTES_PROPERTY = "metadata.log.max.record.bytes.between.snapshots"
MAX_INTERVAL_PROPERTY = "metadata.log.max.snapshot.interval.ms"


class SnapshotGenerator:
    def __init__(
        self,
        *,
        driver: RaftDriver,
        image: Callable[[], MetadataImage],
        clock: Clock,
        max_bytes_between_snapshots: int,
        max_interval_ms: int,
    ) -> None:
        self._driver = driver
        self._image = image
        self._clock = clock
        self.max_bytes_between_snapshots = max_bytes_between_snapshots
        self.max_interval_ms = max_interval_ms
        self.bytes_since_snapshot = 0
        self._oldest_unsnapshotted: float | None = None  # clock.monotonic() of that commit
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self.written: list[OffsetAndEpoch] = []  # snapshots this node made, for tests and logs

    def committed(self, size_in_bytes: int) -> None:
        """Entries of `size_in_bytes` were committed and replayed (called on the loop)."""
        self.bytes_since_snapshot += size_in_bytes
        if self._oldest_unsnapshotted is None:
            self._oldest_unsnapshotted = self._clock.monotonic()
            self._arm_timer()
        self.maybe_snapshot()

    def reset(self) -> None:
        """The image is a snapshot's (loaded at start or installed from the leader)."""
        self.bytes_since_snapshot = 0
        self._oldest_unsnapshotted = None
        self._cancel_timer()

    def maybe_snapshot(self) -> None:
        if self._closed or (self._task is not None and not self._task.done()):
            return
        if not self._due():
            return
        self._task = asyncio.get_running_loop().create_task(self._snapshot())

    def _due(self) -> bool:
        if self.bytes_since_snapshot <= 0:
            return False
        if self.bytes_since_snapshot >= self.max_bytes_between_snapshots:
            return True
        oldest = self._oldest_unsnapshotted
        return (
            self.max_interval_ms > 0
            and oldest is not None
            and (self._clock.monotonic() - oldest) * 1000 >= self.max_interval_ms
        )

    async def _snapshot(self) -> None:
        image = self._image()
        try:
            snapshot_id = self._driver.snapshot_id_for(image.offset + 1)
        except ValueError:
            return  # the log starts at or past it (a snapshot was installed)
        covered_bytes = self.bytes_since_snapshot
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="metadata-snapshot"
            )
        store = self._driver.snapshots
        assert store is not None
        header = self._driver.snapshot_header_for(snapshot_id)  # the quorum's voters, if dynamic

        def write() -> tuple[int, float]:
            started = time.perf_counter()
            contents = header + encode_snapshot(image)
            store.create(snapshot_id, contents)
            return len(contents), time.perf_counter() - started

        try:
            size, seconds = await asyncio.get_running_loop().run_in_executor(self._executor, write)
        except Exception:
            logger.exception("writing the metadata snapshot %s failed", snapshot_id)
            return
        if self._closed or not self._driver.trim_log_to_snapshot(snapshot_id):
            return
        self.written.append(snapshot_id)
        logger.info(
            "wrote metadata snapshot %s (%d bytes, %d topics) in %.3f s; the log starts there",
            snapshot_id,
            size,
            len(image.topics),
            seconds,
        )
        self.bytes_since_snapshot = max(0, self.bytes_since_snapshot - covered_bytes)
        if self.bytes_since_snapshot == 0:
            self.reset()
        else:  # committed while it was written: their interval starts now
            self._oldest_unsnapshotted = self._clock.monotonic()
            self._arm_timer()
            self.maybe_snapshot()

    def _arm_timer(self) -> None:
        self._cancel_timer()
        if self.max_interval_ms > 0 and not self._closed:
            self._timer = asyncio.get_running_loop().call_later(
                self.max_interval_ms / 1000, self._on_timer
            )

    def _on_timer(self) -> None:
        self._timer = None
        self.maybe_snapshot()
        if self._oldest_unsnapshotted is not None and self._timer is None:
            # A snapshot in progress covers them, or will be retried: look again later.
            self._arm_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def close(self) -> None:
        """Stop deciding; a snapshot being written is finished (not trimmed to) first."""
        self._closed = True
        self._cancel_timer()
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task])
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
