"""One client connection: frames in, responses out in request order, zero-copy file regions.

`KafkaConnection` is an `asyncio.Protocol` (Streams cost ~2x per request). Each complete frame is
given to the processor, which answers at once (bytes, or chunks of bytes and file regions) or
later (a `Deferred`, or an awaitable). Requests may complete out of order; responses leave
strictly in request order, and every response ready after one read is joined into one write.
A request the processor is still applying (`Applying`: a produce whose transaction is being
verified) holds back the frames behind it until it is applied, so requests take effect in the
order they arrived, as in Kafka, which serves one request of a channel at a time.

File regions are sent with `os.sendfile` (uvloop has no `loop.sendfile`) on a duplicate of the
socket's descriptor once the transport's own buffer has drained; writability of that duplicate
resumes a partial send. Regions of at most COPY_REGION_MAX_BYTES are read and joined into the
response's write instead: one send, not three.

On an SSL listener the connection owns a `TlsSession` (moldau.net.tls): reads go through it
before the frame decoder, every write through it after (file regions are copied: no sendfile
through TLS). Until its handshake completes nothing is decoded; a handshake must complete within
`request_timeout_s`, and one that fails closes the connection with one log line. The client
certificate's principal is set on `ConnectionInfo` when the handshake completes.

Limits, so that no client can exhaust memory or starve the others (Kafka mutes a channel for the
same reasons):
- at most FRAMES_PER_TURN frames, or as many as TURN_BUDGET_S of work allows, are dispatched per
  turn of the event loop; the rest of a read waits, unparsed, for the connection's next turn
  (scheduled behind every other ready callback);
- on a client listener, turns also share the node's `TurnScheduler` (moldau.net.turns): client
  connections together take about ROUND_BUDGET_S of work per iteration of the loop, so the quorum
  and the controller on the same loop keep their deadlines under a flood;
- no frame is dispatched while MAX_IN_FLIGHT requests are unanswered or the transport's buffer is
  above its high-water mark (a client that never reads its answers); reading pauses meanwhile,
  so what the connection holds is one read, its answers and its requests in flight;
- a frame larger than SMALL_FRAME_BYTES needs a reservation of its whole size from the node's
  `RequestMemoryPool` (`queued.max.request.bytes`) before its body is kept; a connection whose
  reserved frame trickles in while others wait for memory is closed (the pool's reclaiming);
- a frame must arrive whole within `request_timeout_s` of its first byte, and a connection with
  nothing to do is closed after `idle_timeout_s` (`connections.max.idle.ms`);
- a client over its quota is muted (KIP-219): its answer leaves at once, then no frame is
  taken and reading pauses until the throttle time has passed (`ConnectionInfo.mute`, called
  by the processor; a later mute only extends an earlier one).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from moldau.net.connection_quotas import ConnectionQuotas
from moldau.net.deferred import Deferred
from moldau.net.memory_pool import RequestMemoryPool
from moldau.net.principal import ANONYMOUS, PrincipalMappingError
from moldau.net.tls import TlsFailed, TlsServer, TlsSession
from moldau.net.turns import TASK_COST_S, QueuedTurn, TurnScheduler
from moldau.protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrameSize

log = logging.getLogger(__name__)


class _RefusalLog:
    """One line per second at most for connections refused by the limits (a flood of them
    must not flood the log), with the count of those not named."""

    def __init__(self) -> None:
        self._last = 0.0
        self._unlogged = 0

    def note(self, peer: str, reason: str) -> None:
        now = time.monotonic()
        if now - self._last < 1.0:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more refused since the last line)" if self._unlogged else ""
        log.warning("refused the connection from %s: %s%s", peer, reason, more)
        self._last = now
        self._unlogged = 0


_refused_connections = _RefusalLog()
_INT32 = struct.Struct(">i")


class FileRegion(Protocol):
    position: int
    length: int

    def fileno(self) -> int: ...

    def read_bytes(self) -> bytes: ...


class CloseConnection(Exception):
    """Raised by a processor to drop the connection (malformed or unsupported request)."""


@dataclass(slots=True)
class ConnectionInfo:
    """What the handlers know of a connection. `principal` is who the peer is (from its TLS
        certificate on SSL listeners, from SASL on SASL listeners; `User:ANONYMOUS` otherwise);
        `authenticated` is False only while a listener that requires authentication (SASL) waits
        for it: `set_authenticated(principal)` records it and lifts the small frame cap.

        `closing`: the processor wants the connection closed once the answers taken so far have
        been written (a failed authentication); no further frame is dispatched. `authentication`
        is the SASL session the broker keeps for the connection, and `session_expires_at` its
        end (time.monotonic(), KIP-368) when the listener limits sessions. `mute(seconds)` takes
        no further frame from the connection for that long (a throttled client, KIP-219). `on_close`
    callbacks run once the connection has closed."""

    client_host: str
    client_port: int
    listener_name: str
    security_protocol: str
    zero_copy: bool
    authenticated: bool = False
    principal: str = ANONYMOUS
    state: dict[str, Any] | None = None
    tls_version: str | None = None
    closing: bool = False
    authentication: Any = None
    session_expires_at: float | None = None
    set_authenticated: Callable[[str], None] | None = None
    mute: Callable[[float], None] | None = None
    # Called once the connection has closed (what a request left behind that lives only as
    # long as its connection: a share session).
    on_close: list[Callable[[], None]] = field(default_factory=list)


# What a processor returns for one frame: a response (bytes, list of chunks), None for no response,
# or either later: a `Deferred` (written in the call that settles it) or an awaitable.
Outcome = Any
Processor = Callable[[bytes | memoryview, ConnectionInfo], Outcome]

MAX_IN_FLIGHT = 64
# Requests answered by a task (a coroutine: the handler's work runs later, outside the turn that
# took the frame) that a connection may have queued at once: Kafka serves one request of a channel
# at a time; without a bound, a connection pipelining costly requests fills the loop's queue ahead
# of every other connection's.
MAX_TASKS_IN_FLIGHT = 1
FRAMES_PER_TURN = 16
# A turn also ends once its requests have taken this long: a connection whose requests are costly
# (Metadata for every topic, say) takes fewer of them before the others are served.
TURN_BUDGET_S = 0.002
SMALL_FRAME_BYTES = 64 * 1024
WRITE_HIGH_WATER = 1024 * 1024
# File regions up to this size are read and joined into the response's one write: a pread and
# a memcpy cost less than the extra send, sendfile and TCP segment (and the client's extra
# wake-up) of sending header, records and trailer separately. Larger regions go zero-copy.
COPY_REGION_MAX_BYTES = 16 * 1024


def _unconnected(data: bytes) -> None:
    raise RuntimeError("write before the connection was made")


@dataclass(frozen=True, slots=True)
class Applying:
    """An answer to a request that is still being applied: no later frame of the connection is
    dispatched until `pending` completes. `pending` gives the answer, or a `Deferred` of it when
    what is left is a wait that later requests need not sit behind (an acks=all flush)."""

    pending: Awaitable[Any]


class _Slot:
    __slots__ = ("done", "reserved", "value")

    def __init__(self, reserved: int) -> None:
        self.done = False
        self.value: Any = None
        self.reserved = reserved  # bytes of the memory pool held until the answer leaves


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        processor: Processor,
        *,
        listener_name: str,
        security_protocol: str,
        max_frame_size: int,
        max_frame_size_unauthenticated: int | None = None,
        on_close: Callable[[KafkaConnection], None] | None = None,
        idle_timeout_s: float | None = None,
        request_timeout_s: float | None = None,
        memory_pool: RequestMemoryPool | None = None,
        tls: TlsServer | None = None,
        quotas: ConnectionQuotas | None = None,
        turns: TurnScheduler | None = None,
    ) -> None:
        self._processor = processor
        self._quotas = quotas
        self._counted = False  # admitted by `quotas`, released when the connection ends
        self._tls_server = tls
        self._tls: TlsSession | None = None  # once connected, on an SSL listener
        self._requires_authentication = max_frame_size_unauthenticated is not None
        self._write: Callable[[bytes], object] = _unconnected
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        self._pool = memory_pool
        self._decoder = FrameDecoder(
            max_frame_size_unauthenticated or max_frame_size,
            views=True,
            reserve=self._reserve_frame if memory_pool is not None else None,
            small_frame_bytes=SMALL_FRAME_BYTES,
        )
        self._max_frame_size = max_frame_size
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._slots: collections.deque[_Slot] = collections.deque()
        self._out: collections.deque[Any] = collections.deque()  # bytes | FileRegion (+ offset)
        self._region_sent = 0
        self._sendfile_fd: int | None = None
        self._waiting_writable = False
        self._reading_paused = False
        self._writing_paused = False
        self._muted = False  # throttled: no frame is taken until `_mute_timer` fires
        self._muted_until = 0.0
        self._mute_timer: asyncio.TimerHandle | None = None
        self._closing = False
        self._draining = False  # the node is stopping (`stop_taking_requests`)
        self._reading = False  # inside data_received: answers settled now join its one write
        self._tasks: set[asyncio.Future[Any]] = set()
        self._applying = False  # a request is being applied (`Applying`): the others wait
        self._turn: asyncio.Handle | QueuedTurn | None = None  # the next turn, when frames wait
        self._turns = turns
        self._tasks_started = 0
        self._idle_timeout_s = idle_timeout_s
        self._request_timeout_s = request_timeout_s
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._last_active = 0.0  # time.monotonic() of the last read; checked when the timer fires
        self._partial_since: float | None = None  # since when a frame waits for its bytes
        self.info: ConnectionInfo | None = None

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = transport  # type: ignore[assignment]
        self._write = transport.write  # type: ignore[attr-defined]
        peer = transport.get_extra_info("peername") or ("", 0)
        self.info = ConnectionInfo(
            client_host=str(peer[0]),
            client_port=int(peer[1]) if len(peer) > 1 else 0,
            listener_name=self._listener_name,
            security_protocol=self._security_protocol,
            zero_copy=self._tls_server is None,
            authenticated=not self._requires_authentication,
            state={},
            set_authenticated=self.authenticated,
            mute=self.mute,
        )
        if self._quotas is not None:
            refusal = self._quotas.admit(self._listener_name, self.info.client_host)
            if refusal is not None:
                _refused_connections.note(self._peer(), refusal)
                self._closing = True
                transport.abort()  # type: ignore[attr-defined]
                return
            self._counted = True
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        self._touch()
        if self._tls_server is not None:
            self._tls = TlsSession(self._tls_server.context)
            self._write = self._write_tls
            self._partial_since = time.monotonic()  # the handshake is bound like a request
            self._arm_timer()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._touch()
        if self._tls is not None:
            data = self._receive_tls(data)
            if not data:
                return
        self._decoder.receive(data)
        if self._turn is None:
            if self._turns is None:
                self._process()
            else:  # (a turn run now may itself have queued the next: keep that one)
                queued = self._turns.run_fresh(self._process)
                if queued is not None:
                    self._turn = queued

    def _next_turn(self) -> asyncio.Handle | QueuedTurn:
        """A turn later, behind what is ready now (and, under a scheduler, in its rounds)."""
        if self._turns is None:
            return asyncio.get_running_loop().call_soon(self._process)
        return self._turns.queue_backlog(self._process)

    def _process(self) -> float:
        """One turn: dispatch the frames that have arrived, as far as the limits allow. Returns
        what the turn charges the node's `TurnScheduler`: its time, and `TASK_COST_S` for each
        request it handed to a task."""
        started, tasks = time.perf_counter(), self._tasks_started
        self._take_frames()
        return time.perf_counter() - started + TASK_COST_S * (self._tasks_started - tasks)

    def _take_frames(self) -> None:
        self._turn = None
        if self._closing:
            return
        decoder = self._decoder
        self._reading = True
        turn_ends = time.perf_counter() + TURN_BUDGET_S
        try:
            for _ in range(FRAMES_PER_TURN):
                if self._held():
                    break
                frame = decoder.next_frame()
                if frame is None:
                    if decoder.awaiting_memory:
                        assert self._pool is not None
                        self._pool.wait(self._process, decoder.frame_size)
                    break
                self._partial_since = None
                self._accept(frame)
                if self._closing:
                    return
                if self.info is not None and self.info.closing:
                    break
                if time.perf_counter() > turn_ends and decoder.buffered:
                    self._turn = self._next_turn()
                    break
            else:
                if decoder.buffered:  # the turn is spent: the others go first
                    self._turn = self._next_turn()
        except (FrameTooLarge, InvalidFrameSize) as exc:
            log.info("closing connection from %s: %s", self._peer(), exc)
            self.close()
            return
        finally:
            self._reading = False
        waiting_for_bytes = (
            decoder.in_frame
            and self._turn is None
            and not self._held()
            and not decoder.awaiting_memory
        )
        if waiting_for_bytes and self._partial_since is None:
            self._partial_since = time.monotonic()
            self._arm_timer()
        self._flush_ready()
        self._update_reading()

    def eof_received(self) -> bool | None:
        return None

    # --- TLS -------------------------------------------------------------------------------------

    def _receive_tls(self, data: bytes) -> bytes:
        """Encrypted bytes in, plaintext out (b"" while the handshake runs or after a failure)."""
        tls = self._tls
        assert tls is not None and self._transport is not None
        was_established = tls.established
        try:
            plaintext = tls.receive(data)
        except TlsFailed as failure:
            self._transport.write(tls.outgoing())  # the alert, so the client knows why
            what = "TLS" if was_established else "TLS handshake"
            log.info(
                "closing connection from %s on %s: %s failed: %s",
                self._peer(),
                self._listener_name,
                what,
                failure,
            )
            self._abandon_tls()
            return b""
        out = tls.outgoing()
        if out:
            self._transport.write(out)
        if not was_established and tls.established and not self._tls_established():
            return b""
        if tls.closed:  # the client's close_notify
            self.close()
            return b""
        return plaintext

    def _tls_established(self) -> bool:
        """The handshake completed: note who the client is. False if it must be refused."""
        tls, info = self._tls, self.info
        assert tls is not None and info is not None and self._tls_server is not None
        self._partial_since = None
        info.tls_version = tls.version
        try:
            info.principal = self._tls_server.principal_of(tls.peer_certificate())
        except (PrincipalMappingError, ValueError) as error:
            log.info("closing connection from %s: %s", self._peer(), error)
            self.close()
            return False
        log.debug("%s connected over %s as %s", self._peer(), info.tls_version, info.principal)
        return True

    def _write_tls(self, data: bytes) -> None:
        assert self._tls is not None and self._transport is not None
        self._transport.write(self._tls.send(data))

    def _abandon_tls(self) -> None:
        """Close without a close_notify (the session failed)."""
        self._tls = None
        if self._transport is not None and not self._closing:
            self._closing = True
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._counted:
            assert self._quotas is not None and self.info is not None
            self._quotas.release(self._listener_name, self.info.client_host)
            self._counted = False
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        if self._pool is not None:
            held = self._decoder.reserved + sum(slot.reserved for slot in self._slots)
            self._pool.forget(self._process, claimant=self)
            if held:
                self._pool.release(held)
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None
        self._slots.clear()
        self._out.clear()
        self._stop_waiting_writable()
        if self._sendfile_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._sendfile_fd)
            self._sendfile_fd = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None
        if self.info is not None:
            for callback in self.info.on_close:
                try:
                    callback()
                except Exception:
                    log.exception("a connection-close callback failed")
            self.info.on_close.clear()
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()
        self._after_progress()

    # --- requests --------------------------------------------------------------------------------

    def authenticated(self, principal: str) -> None:
        """Note the authenticated principal and lift the small pre-authentication frame cap
        (`ConnectionInfo.set_authenticated`, called by the SASL handlers)."""
        assert self.info is not None
        self.info.authenticated = True
        self.info.principal = principal
        self._decoder.max_frame_size = self._max_frame_size

    def _accept(self, frame: bytes | memoryview) -> None:
        assert self.info is not None
        reserved = len(frame) if self._pool is not None and len(frame) > SMALL_FRAME_BYTES else 0
        if reserved:
            assert self._pool is not None
            self._pool.claimed(self)
        slot = _Slot(reserved)
        self._slots.append(slot)
        try:
            outcome = self._processor(frame, self.info)
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self._peer(), exc)
            self.close()
            return
        kind = type(outcome)
        if kind is bytes or kind is list or outcome is None:  # answered now: the common case
            slot.done = True
            slot.value = outcome
        elif isinstance(outcome, Deferred):
            outcome.then(
                lambda value, s=slot: self._settled(s, value),  # type: ignore[misc]
                self._failed,
            )
        elif isinstance(outcome, Applying):
            self._applying = True
            self._tasks_started += 1
            future = asyncio.ensure_future(outcome.pending)
            self._tasks.add(future)
            future.add_done_callback(functools.partial(self._applied, slot))
        elif isinstance(outcome, Awaitable):
            self._tasks_started += 1
            future = asyncio.ensure_future(outcome)
            self._tasks.add(future)
            future.add_done_callback(functools.partial(self._completed, slot))
        else:
            slot.done = True
            slot.value = outcome

    # --- the memory pool (`RequestMemoryPool`): this connection as a claimant ------------------

    def _reserve_frame(self, size: int) -> bool:
        assert self._pool is not None
        if not self._pool.try_reserve(size, claimant=self):
            return False
        self._pool.forget(self._process)  # (if it waited, it waits no more)
        return True

    def claim_progress(self) -> int:
        return self._decoder.buffered

    def evict(self, reason: str) -> None:
        log.info("closing connection from %s: %s", self._peer(), reason)
        self.close()

    def _completed(self, slot: _Slot, future: asyncio.Future[Any]) -> None:
        self._tasks.discard(future)
        if self._closing or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self._failed(exc)
            return
        value = future.result()
        if isinstance(value, Deferred):  # applied; the answer waits for something else
            value.then(lambda settled: self._settled(slot, settled), self._failed)
            self._after_progress()  # (a task fewer in flight)
            return
        self._settled(slot, value)

    def _applied(self, slot: _Slot, future: asyncio.Future[Any]) -> None:
        """The request that held the others back is applied: they may be taken now."""
        self._applying = False
        self._completed(slot, future)
        self._after_progress()

    def _settled(self, slot: _Slot, value: Any) -> None:
        if self._closing:
            return
        slot.done = True
        slot.value = value
        if self._reading:  # answered within the read that carried it: joined at its end
            return
        self._flush_ready()
        self._after_progress()

    def _failed(self, exc: BaseException) -> None:
        if self._closing:
            return
        if not isinstance(exc, CloseConnection):
            log.error("request from %s failed", self._peer(), exc_info=exc)
        self.close()

    def _flush_ready(self) -> None:
        slots = self._slots
        joined: list[bytes] = []
        released = 0
        while slots and slots[0].done:
            slot = slots.popleft()
            released += slot.reserved
            value = slot.value
            if value is None:
                continue
            if type(value) is bytes or isinstance(value, bytearray | memoryview):
                joined.append(bytes(value))
                continue
            for chunk in value:  # list of chunks: bytes and file regions
                if type(chunk) is bytes or isinstance(chunk, bytearray | memoryview):
                    joined.append(bytes(chunk))
                elif chunk.length <= COPY_REGION_MAX_BYTES:
                    data = chunk.read_bytes()
                    if len(data) != chunk.length:  # truncated under us: the frame would lie
                        log.warning("file region shrank while answering %s", self._peer())
                        self.close()
                        return
                    joined.append(data)
                else:
                    if joined:
                        self._out.append(b"".join(joined))
                        joined = []
                    self._out.append(chunk)
        if joined:
            self._out.append(b"".join(joined))
        if released:
            assert self._pool is not None
            self._pool.release(released)
        self._pump()
        if not slots and self.info is not None and self.info.closing:
            self.close()  # the last answer is written (the transport flushes it, then closes)

    # --- output ----------------------------------------------------------------------------------

    def _pump(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        out = self._out
        while out:
            chunk = out[0]
            if isinstance(chunk, bytes):
                self._write(chunk)
                out.popleft()
                continue
            if not self._send_region(chunk):
                return
            out.popleft()
            self._region_sent = 0

    def _send_region(self, region: FileRegion) -> bool:
        """Send one file region; False if it must wait for the socket to become writable."""
        transport = self._transport
        assert transport is not None and self.info is not None
        if not self.info.zero_copy or transport.get_extra_info("socket") is None:
            self._write(region.read_bytes())
            return True
        if transport.get_write_buffer_size() > 0:
            self._wait_writable()
            return False
        if self._sendfile_fd is None:
            self._sendfile_fd = os.dup(transport.get_extra_info("socket").fileno())
        while self._region_sent < region.length:
            try:
                sent = os.sendfile(
                    self._sendfile_fd,
                    region.fileno(),
                    region.position + self._region_sent,
                    region.length - self._region_sent,
                )
            except BlockingIOError:
                self._wait_writable()
                return False
            except OSError as exc:
                log.info("sendfile to %s failed: %s", self._peer(), exc)
                self.close()
                return False
            if sent == 0:  # the file is shorter than the region: it was truncated under us
                log.warning("file region shrank while sending to %s", self._peer())
                self.close()
                return False
            self._region_sent += sent
        self._stop_waiting_writable()
        return True

    def _wait_writable(self) -> None:
        if self._waiting_writable:
            return
        loop = asyncio.get_running_loop()
        if self._sendfile_fd is None:
            assert self._transport is not None
            self._sendfile_fd = os.dup(self._transport.get_extra_info("socket").fileno())
        loop.add_writer(self._sendfile_fd, self._on_writable)
        self._waiting_writable = True

    def _stop_waiting_writable(self) -> None:
        if self._waiting_writable and self._sendfile_fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_writer(self._sendfile_fd)
        self._waiting_writable = False

    def _on_writable(self) -> None:
        self._stop_waiting_writable()
        self._pump()
        self._after_progress()

    # --- flow control ----------------------------------------------------------------------------

    def _held(self) -> bool:
        """True while no further frame may be dispatched."""
        return (
            len(self._slots) >= MAX_IN_FLIGHT
            or len(self._tasks) >= MAX_TASKS_IN_FLIGHT
            or self._applying
            or self._writing_paused
            or self._muted
            or len(self._out) > 8
            or self._draining
            or (self.info is not None and self.info.closing)
        )

    def mute(self, seconds: float) -> None:
        """Take no frame for `seconds` (KIP-219: a client over its quota). Answers already
        taken still leave; reading pauses meanwhile, as for the other limits."""
        if self._closing or seconds <= 0:
            return
        until = time.monotonic() + seconds
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._muted = True
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._mute_timer = asyncio.get_running_loop().call_later(seconds, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self._mute_timer = None
        self._muted = False
        self._after_progress()

    def stop_taking_requests(self) -> None:
        """The node is stopping: answer the requests taken, dispatch no further frame."""
        self._draining = True
        self._update_reading()

    def _update_reading(self) -> None:
        """Read from the socket only while the frames it brings could be taken."""
        if self._transport is None or self._closing:
            return
        hold = self._held() or self._decoder.awaiting_memory or self._turn is not None
        if hold and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not hold and self._reading_paused:
            self._transport.resume_reading()
            self._reading_paused = False

    def _after_progress(self) -> None:
        """An answer left or the socket drained: frames that waited may be taken now."""
        if self._closing or self._held():
            return
        if self._decoder.buffered and self._turn is None and not self._decoder.awaiting_memory:
            self._turn = self._next_turn()
        self._update_reading()

    # --- timers: idle connections, frames that never complete ------------------------------------

    def _touch(self) -> None:
        """Note activity: a clock read per read. The connection's one timer is re-armed when it
        fires, not cancelled and created again on every read."""
        if self._idle_timeout_s is None:
            return
        self._last_active = time.monotonic()
        if self._timer is None:
            self._arm_timer()

    def _arm_timer(self) -> None:
        now = time.monotonic()
        due = []
        if self._idle_timeout_s is not None:
            due.append(self._last_active + self._idle_timeout_s)
        if self._request_timeout_s is not None and self._partial_since is not None:
            due.append(self._partial_since + self._request_timeout_s)
        if not due:
            return
        when = min(due)
        if self._timer is not None:
            if self._timer_due <= when:
                return
            self._timer.cancel()
        self._timer_due = when
        self._timer = asyncio.get_running_loop().call_later(max(when - now, 0.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closing:
            return
        now = time.monotonic()
        if self._reading_paused and self._partial_since is not None:
            self._partial_since = now  # we are not reading: the client cannot be blamed
        if (
            self._request_timeout_s is not None
            and self._partial_since is not None
            and now - self._partial_since >= self._request_timeout_s
        ):
            log.info(
                "closing connection from %s: %s within %.0f ms",
                self._peer(),
                "the TLS handshake did not complete"
                if self._tls is not None and not self._tls.established
                else "a request did not arrive whole",
                self._request_timeout_s * 1000,
            )
            self.close()
            return
        if (
            self._idle_timeout_s is not None
            and now - self._last_active >= self._idle_timeout_s
            and not self._slots
            and not self._out
        ):
            log.debug("closing idle connection from %s", self._peer())
            self.close()
            return
        if self._idle_timeout_s is not None and now - self._last_active >= self._idle_timeout_s:
            self._last_active = now  # busy answering: idle time starts when the answers left
        self._arm_timer()

    def close(self) -> None:
        if self._transport is not None and not self._closing:
            self._closing = True
            if self._tls is not None:
                self._transport.write(self._tls.close())  # close_notify
            self._transport.close()

    def _peer(self) -> str:
        if self.info is None:
            return "?"
        return f"{self.info.client_host}:{self.info.client_port}"

    @property
    def in_flight(self) -> int:
        return len(self._slots)
