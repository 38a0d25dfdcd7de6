"""The asyncio driver of a `RaftNode`: runs its actions against the log and quorum-state file.

Mirrors the I/O half of Kafka's KafkaRaftClient. Appends go to the log (page cache) on the
event loop; fsyncs run in a worker thread via `loop.run_in_executor`, one at a time, each
covering every append made before it started (group commit). Committed entries reach the
`RaftListener` in offset order, on the loop; `append()` futures resolve at the same moment.
The quorum-state file is written synchronously: it changes only at start and on elections.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
from collections.abc import Sequence
from typing import Protocol

from moldau.clock import Clock
from moldau.raft.log import LogEntry, ReplicatedLog
from moldau.raft.node import (
    AppendToLog,
    ClientAppend,
    CommitUpTo,
    FlushLog,
    LeaderChanged,
    LogFlushed,
    PersistElectionState,
    RaftAction,
    RaftEvent,
    RaftNode,
    Resign,
    Start,
)
from moldau.raft.quorum_state import ElectionState

logger = logging.getLogger(__name__)


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class RaftListener(Protocol):
    """The replicated state machine (the controller) above the log."""

    def handle_commit(self, entries: Sequence[LogEntry]) -> None:
        """Committed entries in offset order, control entries included (skip them)."""
        ...

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None: ...


class RaftDriver:
    def __init__(
        self,
        *,
        node: RaftNode,
        log: ReplicatedLog,
        quorum_state_store: QuorumStateStore,
        listener: RaftListener,
        clock: Clock,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self.node = node
        self.log = log
        self.quorum_state_store = quorum_state_store
        self.listener = listener
        self.clock = clock
        self.executor = executor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._delivered_offset = 0  # the next offset to hand to the listener
        self._pending: collections.deque[tuple[int, asyncio.Future[int]]] = collections.deque()
        self._flush_task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._first_commit: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Replay nothing yet, elect (a single voter elects itself), and wait until the log
        on disk is committed and handed to the listener."""
        self._loop = asyncio.get_running_loop()
        self._first_commit = self._loop.create_future()
        self._step(
            Start(
                election_state=self.quorum_state_store.read(),
                log_end_offset=self.log.end_offset,
                last_epoch=self.log.last_epoch,
            )
        )
        await self._first_commit

    def append(self, records: Sequence[bytes]) -> asyncio.Future[int]:
        """Append `records` as one entry; the future resolves with its last offset on commit.

        Raises NotLeaderError at once when this node cannot accept appends."""
        if self._failure is not None:
            raise RuntimeError("the metadata log failed") from self._failure
        if self._loop is None:
            raise RuntimeError("RaftDriver.start() has not run")
        future: asyncio.Future[int] = self._loop.create_future()
        before = self.node.log_end_offset
        self._step(ClientAppend(records=tuple(records)))
        self._pending.append((self.node.log_end_offset - 1, future))
        assert self.node.log_end_offset == before + len(records)
        return future

    async def stop(self) -> None:
        """Resign and wait for the flush in progress (appends already made get committed)."""
        if self._loop is None:
            return
        self._step(Resign())
        task = self._flush_task
        if task is not None:
            try:
                await task
            except Exception:  # already reported to the waiters
                pass
        for _, future in self._pending:
            if not future.done():
                future.set_exception(RuntimeError("the metadata log was closed"))
        self._pending.clear()
        self.log.close()
        self._loop = None

    def _step(self, event: RaftEvent) -> None:
        self._execute(self.node.step(event, self.clock.monotonic()))

    def _execute(self, actions: list[RaftAction]) -> None:
        for action in actions:
            match action:
                case PersistElectionState():
                    self.quorum_state_store.write(action.state)
                case AppendToLog():
                    self.log.append(action.entry)
                case FlushLog():
                    self._schedule_flush()
                case CommitUpTo():
                    self._deliver_commits(action.high_watermark)
                case LeaderChanged():
                    self.listener.handle_leader_change(action.leader_id, action.epoch)

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            assert self._loop is not None
            self._flush_task = self._loop.create_task(self._flush_until_caught_up())

    async def _flush_until_caught_up(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.log.flushed_offset < self.log.end_offset:
                flushed_offset = await loop.run_in_executor(self.executor, self.log.flush)
                self._step(LogFlushed(flushed_offset=flushed_offset))
        except Exception as exc:
            logger.exception("flushing the metadata log failed")
            self._fail(exc)

    def _deliver_commits(self, high_watermark: int) -> None:
        entries = [
            entry
            for entry in self.log.read(self._delivered_offset)
            if entry.last_offset < high_watermark
        ]
        if entries:
            self._delivered_offset = entries[-1].next_offset
            try:
                self.listener.handle_commit(entries)
            except Exception as exc:
                logger.exception("the metadata listener failed to apply committed entries")
                self._fail(exc)
                return
        while self._pending and self._pending[0][0] < high_watermark:
            last_offset, future = self._pending.popleft()
            if not future.done():
                future.set_result(last_offset)
        if self._first_commit is not None and not self._first_commit.done():
            self._first_commit.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self._failure = exc
        for _, future in self._pending:
            if not future.done():
                future.set_exception(exc)
        self._pending.clear()
        if self._first_commit is not None and not self._first_commit.done():
            self._first_commit.set_exception(exc)
