"""KafkaConnection's limits, with a fake transport: turns, requests in flight, the memory pool."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from moldau.net.connection import (
    FRAMES_PER_TURN,
    MAX_IN_FLIGHT,
    MAX_TASKS_IN_FLIGHT,
    TURN_BUDGET_S,
    Applying,
    KafkaConnection,
)
from moldau.net.deferred import Deferred
from moldau.net.memory_pool import RECLAIM_AFTER_S, RequestMemoryPool
from moldau.net.turns import TurnScheduler


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1234)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _connection(processor: Any, **kwargs: Any) -> tuple[KafkaConnection, FakeTransport]:
    connection = KafkaConnection(
        processor,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        max_frame_size=1 << 24,
        **kwargs,
    )
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_a_flooding_connection_yields_to_others_after_each_turn() -> None:
    async def scenario() -> None:
        order: list[str] = []

        def processor(name: str):
            def process(frame: Any, info: Any) -> bytes:
                order.append(name)
                return b""

            return process

        flooder, flood_transport = _connection(processor("flood"))
        polite, _ = _connection(processor("polite"))
        flooder.data_received(_frame(b"x") * 10_000)
        assert order.count("flood") == FRAMES_PER_TURN
        assert not flood_transport.reading  # frames wait: reading more would only pile them up
        polite.data_received(_frame(b"y"))
        await _turns(3)
        assert order.index("polite") <= 2 * FRAMES_PER_TURN
        await _turns(10_000 // FRAMES_PER_TURN + 5)
        assert order.count("flood") == 10_000
        assert flood_transport.reading

    asyncio.run(scenario())


def test_no_frame_is_dispatched_beyond_the_requests_in_flight_limit() -> None:
    async def scenario() -> None:
        pending: list[Deferred] = []

        def process(frame: Any, info: Any) -> Deferred:
            deferred = Deferred()
            pending.append(deferred)
            return deferred

        connection, transport = _connection(process)
        connection.data_received(_frame(b"r") * (MAX_IN_FLIGHT * 3))
        await _turns(MAX_IN_FLIGHT)
        assert len(pending) == MAX_IN_FLIGHT
        assert not transport.reading
        for deferred in pending[:10]:
            deferred.resolve(_frame(b"answer"))
        await _turns(5)
        assert len(pending) == MAX_IN_FLIGHT + 10
        assert len(transport.written) >= 1

    asyncio.run(scenario())


def test_a_request_being_applied_holds_back_the_frames_behind_it_but_not_their_answers() -> None:
    """`Applying`: frames behind a request still being applied are not dispatched until it is;
    the wait that follows (a `Deferred`) does not hold them, and answers leave in order."""

    async def scenario() -> None:
        dispatched: list[bytes] = []
        applied = asyncio.Event()
        flushed = Deferred()

        async def apply() -> Deferred:
            await applied.wait()
            dispatched.append(b"applied")
            return flushed

        def process(frame: Any, info: Any) -> Any:
            payload = bytes(frame)
            dispatched.append(payload)
            if payload == b"first":
                return Applying(apply())
            return _frame(b"answer " + payload)

        connection, transport = _connection(process)
        connection.data_received(_frame(b"first") + _frame(b"second") + _frame(b"third"))
        await _turns(5)
        assert dispatched == [b"first"]
        applied.set()
        await _turns(5)
        assert dispatched == [b"first", b"applied", b"second", b"third"]
        assert transport.written == []  # the first answer waits for its flush; the rest behind
        flushed.resolve(_frame(b"answer first"))
        await _turns(2)
        assert b"".join(transport.written) == b"".join(
            _frame(b"answer " + name) for name in (b"first", b"second", b"third")
        )
        assert transport.reading

    asyncio.run(scenario())


def test_requests_answered_by_tasks_queue_at_most_a_few_per_connection() -> None:
    """A handler's coroutine runs later, outside the turn that took its frame: a connection
    pipelining such requests has at most MAX_TASKS_IN_FLIGHT of them queued on the loop."""

    async def scenario() -> None:
        started: list[int] = []
        release = asyncio.Event()

        async def answer(index: int) -> bytes:
            await release.wait()
            return _frame(b"%d" % index)

        def process(frame: Any, info: Any) -> Any:
            started.append(len(started))
            return answer(started[-1])

        connection, transport = _connection(process)
        connection.data_received(_frame(b"m") * 20)
        await _turns(20)
        assert len(started) == MAX_TASKS_IN_FLIGHT
        assert not transport.reading
        release.set()
        await _turns(100)
        assert len(started) == 20
        assert b"".join(transport.written) == b"".join(_frame(b"%d" % i) for i in range(20))

    asyncio.run(scenario())


def test_a_turn_ends_once_its_requests_have_taken_the_turn_budget() -> None:
    async def scenario() -> None:
        taken = 0

        def costly(frame: Any, info: Any) -> bytes:
            nonlocal taken
            taken += 1
            time.sleep(TURN_BUDGET_S / 2)
            return _frame(b"answer")

        connection, _ = _connection(costly)
        connection.data_received(_frame(b"m") * FRAMES_PER_TURN)
        assert taken <= 3
        await _turns(FRAMES_PER_TURN)
        assert taken == FRAMES_PER_TURN

    asyncio.run(scenario())


def test_slow_claims_on_the_pool_are_closed_when_others_wait_for_memory() -> None:
    """A client that announces a large frame and trickles it holds pool memory it does not pay
    for: once another connection has waited RECLAIM_AFTER_S, the slowest claims are closed
    until it fits. A claim whose frame arrives at a usable speed is left alone."""

    async def scenario() -> None:
        pool = RequestMemoryPool(1_000_000)
        answers: list[bytes] = []

        def process(frame: Any, info: Any) -> bytes:
            answers.append(bytes(frame))
            return _frame(b"ok")

        big = _frame(b"t" * 300_000)
        slow = [_connection(process, memory_pool=pool) for _ in range(2)]
        for connection, _ in slow:
            connection.data_received(big[:1000])  # 300 KB reserved, 1 KB sent
        steady, steady_transport = _connection(process, memory_pool=pool)
        steady.data_received(big[:250_000])
        assert pool.used == 900_000
        waiter, waiter_transport = _connection(process, memory_pool=pool)
        waiter.data_received(big[:10])
        assert pool.waiting == 1
        await asyncio.sleep(RECLAIM_AFTER_S * 2)
        assert all(transport.closed for _, transport in slow)
        for connection, _ in slow:
            connection.connection_lost(None)  # (as the event loop reports the close)
        await _turns(3)
        assert not steady_transport.closed and not waiter_transport.closed
        assert pool.waiting == 0 and pool.used == 600_000
        waiter.data_received(big[10:])
        steady.data_received(big[250_000:])
        assert answers == [b"t" * 300_000] * 2

    asyncio.run(scenario())


def test_large_frames_wait_for_the_memory_pool_and_release_it_when_answered() -> None:
    async def scenario() -> None:
        pool = RequestMemoryPool(300_000)
        answers: list[Deferred] = []

        def process(frame: Any, info: Any) -> Deferred:
            deferred = Deferred()
            answers.append(deferred)
            return deferred

        first, _ = _connection(process, memory_pool=pool)
        second, second_transport = _connection(process, memory_pool=pool)
        big = _frame(b"b" * 200_000)
        first.data_received(big)
        assert pool.used == 200_000
        second.data_received(big[:1000])  # its size is known: 200 KB more do not fit
        assert pool.used == 200_000 and pool.waiting == 1
        assert not second_transport.reading
        answers[0].resolve(_frame(b"done"))
        await _turns(3)
        assert pool.used == 200_000  # the second frame holds the memory now
        assert second_transport.reading
        second.data_received(big[1000:])
        assert len(answers) == 2
        second.connection_lost(None)
        assert pool.used == 0

    asyncio.run(scenario())


def test_a_muted_connection_answers_at_once_then_takes_no_frame_until_the_mute_ends() -> None:
    async def scenario() -> None:
        taken: list[bytes] = []

        def process(frame: Any, info: Any) -> bytes:
            taken.append(bytes(frame))
            if bytes(frame) == b"first":
                info.mute(0.05)  # a throttled client (KIP-219)
            return _frame(b"answer-" + bytes(frame))

        connection, transport = _connection(process)
        connection.data_received(_frame(b"first") + _frame(b"second"))
        assert taken == [b"first"]
        assert transport.written == [_frame(b"answer-first")]  # sent, not held back
        assert not transport.reading
        connection.mute(0.01)  # a shorter mute does not cut the longer one short
        await asyncio.sleep(0.03)
        assert taken == [b"first"]
        await asyncio.sleep(0.05)
        assert taken == [b"first", b"second"]
        assert transport.reading
        connection.connection_lost(None)

    asyncio.run(scenario())


def test_closing_a_muted_connection_cancels_its_mute() -> None:
    async def scenario() -> None:
        connection, _ = _connection(lambda frame, info: b"")
        connection.mute(10.0)
        connection.connection_lost(None)
        assert connection._mute_timer is None

    asyncio.run(scenario())


def test_connections_sharing_a_turn_scheduler_take_turns_by_rounds_and_finish() -> None:
    async def scenario() -> None:
        order: list[str] = []
        turns = TurnScheduler(budget_s=1e-9)  # one turn per round

        def processor(name: str):
            def process(frame: Any, info: Any) -> bytes:
                order.append(name)
                return _frame(name.encode())

            return process

        flooder, flood_transport = _connection(processor("flood"), turns=turns)
        polite, polite_transport = _connection(processor("polite"), turns=turns)
        flooder.data_received(_frame(b"x") * 1_000)
        flooder.data_received(_frame(b"x") * 1_000)  # (more arrives before the socket pauses)
        assert order.count("flood") == FRAMES_PER_TURN
        polite.data_received(_frame(b"y"))
        await _turns(3)
        assert order.index("polite") <= 2 * FRAMES_PER_TURN  # fresh bytes go ahead of a backlog
        await _turns(2_000 // FRAMES_PER_TURN + 5)
        assert order.count("flood") == 2_000
        assert len(b"".join(flood_transport.written)) == 2_000 * len(_frame(b"flood"))
        assert flood_transport.reading and polite_transport.reading
        assert turns.queued == 0

    asyncio.run(scenario())
