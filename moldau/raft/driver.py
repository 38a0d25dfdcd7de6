"""The asyncio driver of a `RaftNode`: runs its actions against the log, the quorum-state file,
the network and the listener, and its timers on the event loop.

Mirrors the I/O half of Kafka's KafkaRaftClient. Appends (the leader's and a follower's fetched
entries alike) go to the log (page cache) on the event loop; fsyncs run in a worker thread via
`loop.run_in_executor`, one at a time, each covering every append made before it started (group
commit), and report back as `LogFlushed`. Committed entries reach the `RaftListener` in offset
order, on the loop; `append()` futures resolve at the same moment. The quorum-state file is
written synchronously: it changes only on elections, and a vote must be durable before the
response that grants it is sent.

Snapshots: a follower writes the leader's snapshot into the `SnapshotStore` chunk by chunk and,
once whole, replaces its log with it and hands it to the listener (`handle_snapshot`, if it has
one); `create_snapshot` stores one the state machine made and drops the log entries it covers
(or, for one written off the loop: `snapshot_id_for`, `snapshots.create` in a worker thread,
then `trim_log_to_snapshot`). Either way older snapshots go. At start the listener gets the
newest snapshot, then the log that follows it. With dynamic voters (KIP-853) a snapshot starts
with the quorum's header (`snapshot_header_for`): the listener gets only what follows it.

After every step the driver arms one timer for the node's next deadline (`next_deadline()`) and
steps a `Tick` when it fires. Messages leave through a `RaftTransport` and come in through
`receive()`; the driver executes a step's actions completely before it steps the next event, so a
transport may deliver synchronously.

A message the node refuses as one that cannot be true (`Refused`) is logged once per kind and
sender a minute, with a count of the ones held back: whoever sent one may send thousands. An
exception out of the node, the log, the snapshot store or the listener is a failure this node
cannot serve past: the driver stops taking part and calls `on_fatal` with one line (the node
that owns the process exits on it, so that a supervisor restarts it rather than leave a node
that looks alive and no longer answers the quorum).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from moldau.clock import Clock
from moldau.protocol.errors import KafkaError
from moldau.raft.control_records import snapshot_header, split_snapshot
from moldau.raft.events import (
    AddVoter,
    AppendToLog,
    ClientAppend,
    CommitUpTo,
    FlushLog,
    InstallSnapshot,
    LeaderChanged,
    LogFlushed,
    PersistElectionState,
    RaftAction,
    RaftEvent,
    Receive,
    Refused,
    RemoveVoter,
    Resign,
    Send,
    Start,
    Tick,
    TruncateLog,
    UpdateVoter,
    UpgradeKRaftVersion,
    WriteSnapshotChunk,
)
from moldau.raft.log import LogEntry, OffsetAndEpoch, ReplicatedLog, end_after_truncation
from moldau.raft.messages import RaftMessage
from moldau.raft.node import NotLeaderError, RaftNode
from moldau.raft.quorum_state import ElectionState
from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC

logger = logging.getLogger(__name__)

# A kind of refused message is logged at most once in this long per sender (seconds).
REFUSAL_LOG_INTERVAL_S = 60.0


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class RaftListener(Protocol):
    """The replicated state machine (the controller) above the log."""

    def handle_commit(self, entries: Sequence[LogEntry]) -> None:
        """Committed entries in offset order, control entries included (skip them)."""
        ...

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None: ...


@runtime_checkable
class SnapshotListener(Protocol):
    """A listener that can load a snapshot: its state becomes the snapshot's, and committed
    entries continue from the snapshot's end offset."""

    def handle_snapshot(self, snapshot_id: OffsetAndEpoch, contents: bytes) -> None: ...


class MissingSnapshotError(RuntimeError):
    """The log starts after a snapshot that is not in the store."""


class RaftTransport(Protocol):
    """Sends quorum messages to other nodes; their answers come back through
    `RaftDriver.receive`. `send` must not block; a message it cannot deliver is dropped (the
    node retries on its own timers)."""

    def send(self, destination_id: int, message: RaftMessage) -> None: ...


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
        transport: RaftTransport | None = None,
        snapshots: SnapshotStore | None = None,
    ) -> None:
        self.node = node
        self.log = log
        self.quorum_state_store = quorum_state_store
        self.listener = listener
        self.clock = clock
        self.executor = executor
        self.transport = transport
        self.snapshots = snapshots
        self._loop: asyncio.AbstractEventLoop | None = None
        self._delivered_offset = 0  # the next offset to hand to the listener
        self._pending: collections.deque[tuple[int, asyncio.Future[int]]] = collections.deque()
        self._flush_task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._first_commit: asyncio.Future[None] | None = None
        self._stepping = False
        self._deferred: collections.deque[RaftEvent] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: float | None = None
        # Called once, with one line, when the node can no longer take part (see the module).
        self.on_fatal: Callable[[str], None] | None = None
        self.refusals = RefusalLog(clock)

    async def start(self) -> None:
        """Elect (a single voter elects itself) or rejoin the quorum, and wait until this node
        has committed something and handed it to the listener: on a single voter, the whole log
        found on disk."""
        self._loop = asyncio.get_running_loop()
        self._first_commit = self._loop.create_future()
        latest = self._reconcile_log_with_snapshots()
        self._delivered_offset = self.log.log_start.offset
        if latest is not None:
            self._load_snapshot(latest, first_commit=False)
        self._step(
            Start(
                election_state=self.quorum_state_store.read(),
                log_end_offset=self.log.end_offset,
                last_epoch=self.log.last_epoch,
            )
        )
        await self._first_commit

    def append(self, records: Sequence[bytes]) -> asyncio.Future[int]:
        """Append `records` as one entry; the future resolves with its last offset on commit,
        or fails with NotLeaderError if this node stops leading first.

        Raises NotLeaderError at once when this node cannot accept appends."""
        if self._failure is not None:
            raise RuntimeError("the metadata log failed") from self._failure
        if self._loop is None:
            raise RuntimeError("RaftDriver.start() has not run")
        if self._stepping:
            raise RuntimeError("append() cannot be called from a listener callback")
        future: asyncio.Future[int] = self._loop.create_future()
        before = self.node.log_end_offset
        self._step(ClientAppend(records=tuple(records)))
        self._pending.append((self.node.log_end_offset - 1, future))
        assert self.node.log_end_offset == before + len(records)
        return future

    def change_voters(self, change: AddVoter | RemoveVoter | UpdateVoter) -> asyncio.Future[int]:
        """Add, remove or update a voter (KIP-853) on the leader: the future resolves with the
        offset of the VotersRecord once it is committed (at once when nothing changes).

        Raises NotLeaderError, or KafkaError saying why the leader refuses the change now."""
        return self._step_control(change, wait_for_log_end=False)

    def upgrade_kraft_version(
        self, version: int, *, validate_only: bool = False
    ) -> asyncio.Future[int]:
        """Raise kraft.version on the leader (KIP-853): the future resolves once the control
        entry is committed; when the version is in the log already, once the log up to its end
        is (an upgrade still in flight lands first); with `validate_only`, at once.

        Raises NotLeaderError, or KafkaError saying why the leader refuses it now."""
        event = UpgradeKRaftVersion(version=version, validate_only=validate_only)
        return self._step_control(event, wait_for_log_end=not validate_only)

    def _step_control(
        self,
        event: AddVoter | RemoveVoter | UpdateVoter | UpgradeKRaftVersion,
        *,
        wait_for_log_end: bool,
    ) -> asyncio.Future[int]:
        if self._failure is not None:
            raise RuntimeError("the metadata log failed") from self._failure
        if self._loop is None:
            raise RuntimeError("RaftDriver.start() has not run")
        future: asyncio.Future[int] = self._loop.create_future()
        before = self.node.log_end_offset
        self._step(event)
        last_offset = self.node.log_end_offset - 1
        appended = self.node.log_end_offset != before
        if appended or (wait_for_log_end and last_offset >= self.node.high_watermark):
            self._pending.append((last_offset, future))
        else:
            future.set_result(last_offset)
        return future

    def snapshot_header_for(self, snapshot_id: OffsetAndEpoch) -> bytes:
        """What a snapshot ending at `snapshot_id` starts with: with dynamic voters, the
        kraft.version and the voter set as of its end (none with static voters)."""
        offset = snapshot_id.offset - 1
        kraft_version = self.node.kraft_version_at(offset)
        if kraft_version < KRAFT_VERSION_DYNAMIC:
            return b""
        return snapshot_header(kraft_version, self.node.voter_set_at(offset))

    def create_snapshot(self, end_offset: int, contents: bytes) -> OffsetAndEpoch:
        """Store a snapshot of the state machine as of `end_offset` (committed, and where an
        entry ends) and drop the log entries below it; returns its id."""
        snapshot_id = self.snapshot_id_for(end_offset)
        self._snapshot_store().create(snapshot_id, self.snapshot_header_for(snapshot_id) + contents)
        self.trim_log_to_snapshot(snapshot_id)
        return snapshot_id

    def snapshot_id_for(self, end_offset: int) -> OffsetAndEpoch:
        """The id a snapshot ending at `end_offset` gets: the offset and the epoch of the entry
        before it. Raises ValueError when `end_offset` is not committed, is not where an entry
        ends, or is not past the log start (a snapshot there exists already)."""
        self._snapshot_store()
        if end_offset > self.node.high_watermark:
            raise ValueError(
                f"offset {end_offset} is not committed (high watermark {self.node.high_watermark})"
            )
        if end_offset <= self.log.log_start.offset:
            raise ValueError(f"the log starts at {self.log.log_start.offset}, past {end_offset}")
        snapshot_id = end_after_truncation(self.log, end_offset)
        if snapshot_id.offset != end_offset:
            raise ValueError(f"no entry ends at offset {end_offset}")
        return snapshot_id

    def trim_log_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        """Start the log at a snapshot already in the store (the state machine may write one
        off the loop with `snapshots.create`): its entries below go, older snapshots too, and
        entries this made durable count as flushed. False, changing nothing, when the log
        starts at or past it already (the leader's snapshot was installed meanwhile)."""
        store = self._snapshot_store()
        if snapshot_id.offset <= self.log.log_start.offset:
            store.delete_before(self.log.log_start)  # it may be one of those: not needed
            return False
        if store.size(snapshot_id) is None:
            raise ValueError(f"snapshot {snapshot_id} is not in the store")
        self.log.delete_before_snapshot(snapshot_id)
        store.delete_before(snapshot_id)
        # A file log rewrites and fsyncs the entries it keeps, perhaps one appended since the
        # last flush whose flush task has not run yet: that task will find nothing to flush,
        # so the node hears of it here, or the entry never commits.
        if self._failure is None and self.log.flushed_offset > self.node.flushed_offset:
            self._step(LogFlushed(flushed_offset=self.log.flushed_offset))
        return True

    def receive(self, source_id: int, message: RaftMessage) -> None:
        """A message from node `source_id` arrived (the transport calls this, on the loop)."""
        if self._loop is None or self._failure is not None:
            return
        self._step(Receive(source_id=source_id, message=message))

    async def stop(self) -> None:
        """Resign (telling the other voters), wait for the flush in progress (appends already
        made get committed if they can), and close the log."""
        if self._loop is None:
            return
        if self._failure is None:
            self._step(Resign())
        task = self._flush_task
        if task is not None:
            try:
                await task
            except Exception:  # already reported to the waiters
                pass
        self._cancel_timer()
        self._fail_pending(RuntimeError("the metadata log was closed"))
        self.log.close()
        if self.snapshots is not None:
            self.snapshots.close()
        self._loop = None

    def _step(self, event: RaftEvent) -> None:
        if self._stepping:
            # A transport that delivered synchronously: the current step's actions finish first.
            self._deferred.append(event)
            return
        self._stepping = True
        try:
            self._step_now(event)
            while self._deferred and self._failure is None:
                self._step_now(self._deferred.popleft())
        finally:
            self._stepping = False
            self._deferred.clear()
        if self._loop is not None and self._failure is None:
            self._arm_timer()

    def _step_now(self, event: RaftEvent) -> None:
        try:
            self._execute(self.node.step(event, self.clock.monotonic()))
        except (NotLeaderError, KafkaError):
            raise  # an append or voter change refused: nothing happened
        except Exception as exc:
            # A broken disk or a RaftSafetyError: this node stops taking part.
            logger.exception("the metadata quorum node failed on %r", event)
            self._fail(exc)
            if isinstance(event, ClientAppend):
                raise

    def _execute(self, actions: list[RaftAction]) -> None:
        for action in actions:
            match action:
                case PersistElectionState():
                    self.quorum_state_store.write(action.state)
                case AppendToLog():
                    self.log.append(action.entry)
                case TruncateLog():
                    self.log.truncate_to(action.offset)
                case WriteSnapshotChunk():
                    self._snapshot_store().write_chunk(
                        action.snapshot_id, action.position, action.data
                    )
                case InstallSnapshot():
                    store = self._snapshot_store()
                    store.complete(action.snapshot_id)
                    self.log.truncate_to_snapshot(action.snapshot_id)
                    store.delete_before(action.snapshot_id)
                    logger.info(
                        "installed the leader's snapshot %s in place of the log",
                        action.snapshot_id,
                    )
                    self._load_snapshot(action.snapshot_id)
                case FlushLog():
                    self._schedule_flush()
                case CommitUpTo():
                    self._deliver_commits(action.high_watermark)
                case LeaderChanged():
                    if action.leader_id != self.node.node_id:
                        self._fail_pending(NotLeaderError(action.leader_id, action.epoch))
                    self.listener.handle_leader_change(action.leader_id, action.epoch)
                case Send():
                    if self.transport is None:
                        raise RuntimeError("a quorum of several nodes needs a transport")
                    self.transport.send(action.destination_id, action.message)
                case Refused():
                    self.refusals.record(action)

    def _snapshot_store(self) -> SnapshotStore:
        if self.snapshots is None:
            raise RuntimeError("this driver has no snapshot store")
        return self.snapshots

    def _reconcile_log_with_snapshots(self) -> OffsetAndEpoch | None:
        """At start: the newest snapshot, with the log starting at it (a crash may have come
        between storing a snapshot and trimming the log, or between installing the leader's
        and truncating the log: Kafka's `truncateToLatestSnapshot`). Raises
        `MissingSnapshotError` when the log starts after every snapshot there is."""
        start = self.log.log_start
        latest = self.snapshots.latest_snapshot_id() if self.snapshots is not None else None
        if latest is None or latest.offset < start.offset:
            if start.offset > 0:
                raise MissingSnapshotError(
                    f"the metadata log starts at offset {start.offset}, after a snapshot, and "
                    "no snapshot at or past it was found (removed or damaged); this node can "
                    "catch up from the quorum's leader once its metadata log directory holds "
                    "only meta.properties"
                )
            return None
        if latest.offset > start.offset:
            if latest.offset >= self.log.end_offset:
                self.log.truncate_to_snapshot(latest)
            else:
                self.log.delete_before_snapshot(latest)
        assert self.snapshots is not None
        self.snapshots.delete_before(latest)
        return latest

    def _load_snapshot(self, snapshot_id: OffsetAndEpoch, *, first_commit: bool = True) -> None:
        if isinstance(self.listener, SnapshotListener):
            header, contents = split_snapshot(self._snapshot_store().load(snapshot_id))
            # The bootstrap checkpoint of dynamic voters holds no state: nothing to load.
            if header is None or contents or snapshot_id.offset > 0:
                self.listener.handle_snapshot(snapshot_id, contents)
        self._delivered_offset = snapshot_id.offset
        if first_commit and self._first_commit is not None and not self._first_commit.done():
            self._first_commit.set_result(None)

    # Timers.

    def _arm_timer(self) -> None:
        deadline = self.node.next_deadline()
        if deadline == self._timer_deadline:
            return
        self._cancel_timer()
        if deadline is None:
            return
        assert self._loop is not None
        delay = max(0.0, deadline - self.clock.monotonic())
        self._timer_deadline = deadline
        self._timer = self._loop.call_later(delay, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_deadline = None

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self._loop is not None and self._failure is None:
            self._step(Tick())

    # Flushing and committing.

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            assert self._loop is not None
            self._flush_task = self._loop.create_task(self._flush_until_caught_up())

    async def _flush_until_caught_up(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.log.flushed_offset < self.log.end_offset:
                await loop.run_in_executor(self.executor, self.log.flush)
                # The log's own figure, read now: a truncation while the fsync ran lowers it.
                self._step(LogFlushed(flushed_offset=self.log.flushed_offset))
                if self._failure is not None:
                    return
        except Exception as exc:
            logger.exception("flushing the metadata log failed")
            self._fail(exc)

    def _deliver_commits(self, high_watermark: int) -> None:
        entries = []
        for entry in self.log.read(self._delivered_offset):
            if entry.last_offset >= high_watermark:
                break
            entries.append(entry)
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

    def _fail_pending(self, exc: BaseException) -> None:
        for _, future in self._pending:
            if not future.done():
                future.set_exception(exc)
        self._pending.clear()

    def _fail(self, exc: BaseException) -> None:
        if self._failure is not None:
            return
        self._failure = exc
        self._cancel_timer()
        self._fail_pending(exc)
        if self._first_commit is not None and not self._first_commit.done():
            self._first_commit.set_exception(exc)
        reason = f"the metadata quorum node failed: {type(exc).__name__}: {exc}"
        logger.critical("%s; it takes no further part in the quorum", reason)
        if self.on_fatal is not None:
            self.on_fatal(reason.splitlines()[0] if reason else reason)


class RefusalLog:
    """Logs refused messages at WARNING, once per (kind, sender) every
    `REFUSAL_LOG_INTERVAL_S`, saying how many were held back since; `counts` keeps every
    refusal by kind (what tests and DescribeQuorum-minded operators read)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._last_logged: dict[tuple[str, int], float] = {}
        self._held_back: collections.Counter[tuple[str, int]] = collections.Counter()
        self.counts: collections.Counter[str] = collections.Counter()

    def record(self, refused: Refused) -> None:
        self.counts[refused.kind] += 1
        key = (refused.kind, refused.source_id)
        now = self._clock.monotonic()
        last = self._last_logged.get(key)
        if last is not None and now - last < REFUSAL_LOG_INTERVAL_S:
            self._held_back[key] += 1
            return
        if len(self._last_logged) > 1024:  # senders are whatever a message says: bound it
            self._last_logged.clear()
            self._held_back.clear()
        self._last_logged[key] = now
        held_back = self._held_back.pop(key, 0)
        more = f" ({held_back} more like it since the last)" if held_back else ""
        logger.warning("refused a quorum message: %s%s", refused.reason, more)
