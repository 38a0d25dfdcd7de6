"""A broker's requests to the active controller follow the quorum's leader: a heartbeat waiting on
a controller that was just deposed and cut off (its packets dropped, so nothing ever answers)
goes to the new one as soon as the quorum names it, long before the request would time out.
Before, the heartbeat waited out its 30 s timeout and the new controller fenced the broker after
`broker.session.timeout.ms` without heartbeats: its own broker too, when it had been the one
waiting (a partition-controller chaos run lost every partition leader on two brokers that way).
"""

from __future__ import annotations

import asyncio

from moldau.broker.controller_channel import ControllerChannel
from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.config.cluster import Voter
from moldau.controller.operations import BrokerHeartbeat, BrokerHeartbeatResult

HEARTBEAT = BrokerHeartbeat(broker_id=1, broker_epoch=7, current_metadata_offset=10)
ANSWER = BrokerHeartbeatResult(is_caught_up=True, is_fenced=False, should_shut_down=False)


class QuorumMember:
    """What the channel reads of this node's quorum member: who leads, and whether it is this
    node's own controller (which then answers in-process)."""

    def __init__(self, leader_id: int) -> None:
        self.leader_id: int | None = leader_id
        self.is_active = False
        self.active_changed = asyncio.Event()
        self.heartbeats: list[BrokerHeartbeat] = []

    async def broker_heartbeat(self, heartbeat: BrokerHeartbeat) -> BrokerHeartbeatResult:
        self.heartbeats.append(heartbeat)
        return ANSWER

    def become_active(self, node_id: int) -> None:
        self.leader_id = node_id
        self.is_active = True
        self.active_changed.set()


class Silent:
    """A controller that is cut off: connections are accepted, nothing is ever answered."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        try:
            while await reader.read(65536):
                pass
        finally:
            self.open -= 1
            writer.close()


def test_a_heartbeat_waiting_on_a_deposed_controller_goes_to_the_new_one_at_once() -> None:
    asyncio.run(_heartbeat_while_the_leader_moves())


async def _heartbeat_while_the_leader_moves() -> None:
    silent = Silent()
    server = await asyncio.start_server(silent.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    member = QuorumMember(leader_id=2)
    addresses = QuorumAddresses(voters=(Voter(2, "127.0.0.1", port), Voter(1, "127.0.0.1", 1)))
    channel = ControllerChannel(member, addresses, node_id=1)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    try:
        heartbeat = asyncio.ensure_future(channel.broker_heartbeat(HEARTBEAT))
        await _until(lambda: silent.accepted == 1)
        await asyncio.sleep(0.3)  # the request to node 2 is pending (nothing will answer it)
        assert not heartbeat.done()

        elected = loop.time()
        member.become_active(1)  # this node's controller now leads the quorum
        async with asyncio.timeout(5):  # the request's own timeout is 30 s
            assert await heartbeat == ANSWER
        assert loop.time() - elected < 1.0
        assert member.heartbeats == [HEARTBEAT]
        await _until(lambda: silent.open == 0)  # the deposed controller's connection is closed
    finally:
        await channel.close()
        server.close()
        await server.wait_closed()


async def _until(condition: object, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


def test_a_request_cancelled_as_its_attempt_fails_leaves_no_unretrieved_error() -> None:
    """A voters chaos run: a controlled-shutdown heartbeat timed out (cancelled) just as its
    attempt failed to connect; the attempt's error was never retrieved and asyncio logged it
    with a traceback at garbage collection."""
    asyncio.run(_cancelled_as_the_attempt_fails())


async def _cancelled_as_the_attempt_fails() -> None:
    import gc

    from moldau.protocol.errors import ErrorCode, KafkaError

    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    member = QuorumMember(leader_id=2)
    addresses = QuorumAddresses(voters=(Voter(2, "127.0.0.1", 1), Voter(1, "127.0.0.1", 1)))
    channel = ControllerChannel(member, addresses, node_id=1)  # type: ignore[arg-type]
    gate = asyncio.Event()

    async def refused(leader: int) -> object:
        await gate.wait()
        raise KafkaError(ErrorCode.network_exception, "connection refused")

    channel._connect = refused  # type: ignore[method-assign,assignment]
    request = asyncio.ensure_future(channel._unless_leader_moves(2, lambda c: c))
    await asyncio.sleep(0.01)  # the attempt waits at the gate
    gate.set()
    await asyncio.sleep(0)  # the attempt fails; the request is not resumed yet
    request.cancel()
    await asyncio.wait({request})
    assert request.cancelled()
    del request
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0)
    assert reported == []
