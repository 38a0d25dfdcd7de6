"""Several RaftDrivers on one event loop over an in-memory transport, with short timeouts:
elections, failover, commits reaching every listener. Waits poll a condition with a deadline."""

from __future__ import annotations

import asyncio
import random

import pytest

from moldau.raft.driver import RaftDriver
from moldau.raft.log import LogEntry, MemoryReplicatedLog, OffsetAndEpoch
from moldau.raft.messages import RaftMessage
from moldau.raft.node import NotLeaderError, RaftNode, Role
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import MemoryQuorumStateStore
from moldau.raft.snapshots import MemorySnapshotStore

FAST = QuorumConfig(
    election_timeout_ms=40,
    fetch_timeout_ms=80,
    election_backoff_max_ms=40,
    request_timeout_ms=80,
    retry_backoff_ms=5,
    fetch_max_wait_ms=20,
)


class LoopClock:
    """The event loop's own time, so the drivers' timers and the nodes' clocks agree."""

    def now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()


class RecordingListener:
    def __init__(self) -> None:
        self.committed: list[LogEntry] = []
        self.leaders: list[tuple[int | None, int]] = []
        self.snapshots: list[tuple[OffsetAndEpoch, bytes]] = []

    def handle_snapshot(self, snapshot_id, contents):
        self.snapshots.append((snapshot_id, contents))

    def handle_commit(self, entries):
        self.committed.extend(entries)

    def handle_leader_change(self, leader_id, epoch):
        self.leaders.append((leader_id, epoch))

    @property
    def records(self) -> list[bytes]:
        return [r for e in self.committed if not e.is_control for r in e.records]


class LoopNetwork:
    """Delivers each message on a later turn of the loop, unless the link is cut."""

    def __init__(self) -> None:
        self.drivers: dict[int, RaftDriver] = {}
        self.disconnected: set[int] = set()

    def transport(self, source_id: int) -> _Transport:
        return _Transport(self, source_id)

    def deliver(self, source_id: int, destination_id: int, message: RaftMessage) -> None:
        if source_id in self.disconnected or destination_id in self.disconnected:
            return
        driver = self.drivers.get(destination_id)
        if driver is not None:
            driver.receive(source_id, message)


class _Transport:
    def __init__(self, network: LoopNetwork, source_id: int) -> None:
        self.network = network
        self.source_id = source_id

    def send(self, destination_id: int, message: RaftMessage) -> None:
        asyncio.get_running_loop().call_soon(
            self.network.deliver, self.source_id, destination_id, message
        )


class Quorum:
    def __init__(self, voters=(1, 2, 3), observers=()) -> None:
        self.network = LoopNetwork()
        self.listeners: dict[int, RecordingListener] = {}
        for node_id in (*voters, *observers):
            log = MemoryReplicatedLog()
            snapshots = MemorySnapshotStore()
            listener = RecordingListener()
            driver = RaftDriver(
                node=RaftNode(
                    node_id=node_id,
                    voters=voters,
                    config=FAST,
                    rng=random.Random(node_id),
                    cluster_id="quorum-test",
                    log=log,
                    snapshots=snapshots,
                ),
                log=log,
                quorum_state_store=MemoryQuorumStateStore(),
                listener=listener,
                clock=LoopClock(),
                transport=self.network.transport(node_id),
                snapshots=snapshots,
            )
            self.network.drivers[node_id] = driver
            self.listeners[node_id] = listener

    @property
    def drivers(self) -> dict[int, RaftDriver]:
        return self.network.drivers

    async def start(self) -> None:
        await asyncio.wait_for(
            asyncio.gather(*(d.start() for d in self.drivers.values())), timeout=10
        )

    def leader(self, among=None) -> int | None:
        for node_id, driver in self.drivers.items():
            if among is not None and node_id not in among:
                continue
            if driver.node.role is Role.LEADER and node_id not in self.network.disconnected:
                return node_id
        return None

    async def stop(self) -> None:
        for driver in list(self.drivers.values()):
            await driver.stop()


async def eventually(predicate, *, timeout: float = 10.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(0.005)


async def elected(quorum: Quorum, among=None) -> int:
    await eventually(lambda: quorum.leader(among) is not None, what="an election")
    leader = quorum.leader(among)
    assert leader is not None
    return leader


def test_three_drivers_elect_a_leader_and_commit_to_every_listener():
    async def scenario():
        quorum = Quorum(observers=(4,))
        await quorum.start()
        leader = await elected(quorum)
        driver = quorum.drivers[leader]
        offsets = await asyncio.wait_for(
            asyncio.gather(*(driver.append([b"r%d" % i]) for i in range(10))), timeout=10
        )
        assert offsets == sorted(offsets)
        expected = [b"r%d" % i for i in range(10)]
        await eventually(
            lambda: all(listener.records == expected for listener in quorum.listeners.values()),
            what="the records reaching every listener",
        )
        for node_id, listener in quorum.listeners.items():
            assert listener.leaders[-1][0] == leader, node_id
        follower = next(n for n in (1, 2, 3) if n != leader)
        with pytest.raises(NotLeaderError):
            quorum.drivers[follower].append([b"no"])
        await quorum.stop()

    asyncio.run(scenario())


def test_a_stopped_leader_hands_over_and_the_others_keep_committing():
    async def scenario():
        quorum = Quorum()
        await quorum.start()
        old = await elected(quorum)
        await quorum.drivers[old].append([b"before"])
        await quorum.drivers[old].stop()
        del quorum.drivers[old]
        new = await elected(quorum)
        assert new != old
        await asyncio.wait_for(quorum.drivers[new].append([b"after"]), timeout=10)
        await eventually(
            lambda: all(
                quorum.listeners[n].records == [b"before", b"after"] for n in quorum.drivers
            ),
            what="both records on the remaining nodes",
        )
        await quorum.stop()

    asyncio.run(scenario())


def test_an_isolated_leader_is_replaced_and_its_uncommitted_append_fails():
    async def scenario():
        quorum = Quorum()
        await quorum.start()
        old = await elected(quorum)
        quorum.network.disconnected.add(old)
        lost = quorum.drivers[old].append([b"never committed"])
        others = [n for n in quorum.drivers if n != old]
        new = await elected(quorum, among=others)
        await asyncio.wait_for(quorum.drivers[new].append([b"committed"]), timeout=10)
        quorum.network.disconnected.clear()
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(lost, timeout=10)
        await eventually(
            lambda: all(
                listener.records == [b"committed"] for listener in quorum.listeners.values()
            ),
            what="the old leader catching up without its lost record",
        )
        assert quorum.drivers[old].node.role is Role.FOLLOWER
        await quorum.stop()

    asyncio.run(scenario())


def test_a_follower_that_fell_behind_the_leaders_snapshot_installs_it():
    async def scenario():
        quorum = Quorum()
        await quorum.start()
        leader = await elected(quorum)
        lagging = next(n for n in quorum.drivers if n != leader)
        quorum.network.disconnected.add(lagging)
        driver = quorum.drivers[leader]
        await asyncio.wait_for(
            asyncio.gather(*(driver.append([b"r%d" % i]) for i in range(5))), timeout=10
        )
        snapshot_id = driver.create_snapshot(driver.node.high_watermark, b"state after r4")
        assert driver.log.log_start == snapshot_id
        await driver.append([b"r5"])
        quorum.network.disconnected.clear()
        behind = quorum.listeners[lagging]
        await eventually(
            lambda: (
                behind.snapshots == [(snapshot_id, b"state after r4")] and behind.records == [b"r5"]
            ),
            what="the lagging follower installing the snapshot and fetching on",
        )
        assert quorum.drivers[lagging].log.log_start == snapshot_id
        await quorum.stop()

    asyncio.run(scenario())
