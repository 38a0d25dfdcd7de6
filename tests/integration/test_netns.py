"""The test network layer (tests/integration/netns.py): namespaces and a bridge that reach each
other, cuts that drop exactly the packets they name, heal, and a teardown that leaves nothing."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .netns import Network, ip, require_namespaces

PORT = 9000
LISTEN = (
    "import os, socket, sys\n"
    "server = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "print(os.getpid(), flush=True)\n"
    "while True:\n"
    "    server.accept()[0].close()\n"
)
CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)"


@pytest.fixture
def network() -> Iterator[Network]:
    require_namespaces()
    with Network([1, 2, 3]) as network:
        yield network


@pytest.fixture
def listeners(network: Network) -> Iterator[dict[int, subprocess.Popen[str]]]:
    """A TCP listener in each node's namespace, on the node's address."""
    started = {}
    try:
        for node_id in network.node_ids:
            started[node_id] = subprocess.Popen(
                [*network.exec_prefix(node_id), sys.executable, "-c", LISTEN,
                 network.address(node_id), str(PORT)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        for process in started.values():
            assert process.stdout is not None
            assert process.stdout.readline().strip() == str(process.pid)  # `ip netns exec` execs
        yield started
    finally:
        for process in started.values():
            process.kill()
            process.wait(10)


def connects(network: Network, source: int | None, destination: int) -> bool:
    """A TCP connection from `source`'s namespace (None: the root namespace) to `destination`."""
    prefix = [] if source is None else network.exec_prefix(source)
    command = [*prefix, sys.executable, "-c", CONNECT, network.address(destination), str(PORT)]
    return subprocess.run(command, capture_output=True, timeout=30, check=False).returncode == 0


def dropped(network: Network, source: int, destination: int) -> bool:
    """Whether `source`'s namespace routes packets to `destination` into a blackhole."""
    routes = ip("-n", network.namespace(source), "route", "show", "type", "blackhole")
    return network.address(destination) in routes.split()


def test_every_node_reaches_every_other_and_the_root_namespace(
    network: Network, listeners: dict[int, subprocess.Popen[str]]
) -> None:
    for destination in network.node_ids:
        assert connects(network, None, destination)
        for source in network.node_ids:
            assert connects(network, source, destination)


def test_partition_cuts_both_directions_between_the_groups_only(
    network: Network, listeners: dict[int, subprocess.Popen[str]]
) -> None:
    network.partition([1], [2, 3])
    assert not connects(network, 2, 1) and not connects(network, 1, 3)
    assert connects(network, 2, 3) and connects(network, None, 1)
    assert all(dropped(network, a, b) for a, b in [(1, 2), (2, 1), (1, 3), (3, 1)])
    network.heal()
    assert connects(network, 2, 1) and connects(network, 1, 3)
    assert network.cuts == set()


def test_one_way_drops_only_the_sources_packets(network: Network) -> None:
    network.one_way(1, 2)
    assert dropped(network, 1, 2)
    assert not dropped(network, 2, 1) and not dropped(network, 1, 3)


def test_bridge_cuts_the_halves_and_keeps_the_middle(network: Network) -> None:
    network.bridge([1], 3, [2])
    assert dropped(network, 1, 2) and dropped(network, 2, 1)
    assert not any(dropped(network, a, b) for a, b in [(1, 3), (3, 1), (2, 3), (3, 2)])


SINK = (
    "import os, socket, sys\n"
    "server = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "print(os.getpid(), flush=True)\n"
    "while True:\n"
    "    connection = server.accept()[0]\n"
    "    while connection.recv(65536):\n"
    "        pass\n"
    "    connection.close()\n"
)
SEND = (
    "import socket, sys, time\n"
    "started = time.monotonic()\n"
    "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)\n"
    "s.sendall(bytes(int(sys.argv[3])))\n"
    "s.shutdown(socket.SHUT_WR)\n"
    "s.recv(1)\n"  # the sink's close: everything arrived
    "print(time.monotonic() - started)\n"
)


def transfer_s(network: Network, source: int, destination: int, size: int) -> float:
    """Seconds for `size` bytes to go from `source`'s namespace to a sink at `destination`."""
    command = [*network.exec_prefix(source), sys.executable, "-c", SEND,
               network.address(destination), str(PORT + 1), str(size)]  # fmt: skip
    return float(subprocess.run(command, capture_output=True, text=True, timeout=60).stdout)


def test_a_slow_link_caps_only_the_traffic_it_names_and_heals(network: Network) -> None:
    sinks = []
    for node_id in (2, 3):
        command = [*network.exec_prefix(node_id), sys.executable, "-c", SINK,
                   network.address(node_id), str(PORT + 1)]  # fmt: skip
        sinks.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    try:
        for sink in sinks:
            assert sink.stdout is not None and sink.stdout.readline().strip() == str(sink.pid)
        size = 64 * 1024  # 2 s at 256 kbit/s
        network.slow(1, [2], rate_kbit=256, queue_ms=500)
        assert network.slow_links == {(1, 2)}
        assert transfer_s(network, 1, 2, size) > 1.0
        assert transfer_s(network, 1, 3, size) < 0.5
        assert transfer_s(network, 2, 3, size) < 0.5
        network.heal()
        assert network.slow_links == set()
        assert transfer_s(network, 1, 2, size) < 0.5
    finally:
        for sink in sinks:
            sink.kill()
            sink.wait(10)


def _leftovers(network: Network) -> list[str]:
    links = ip("-o", "link", "show")
    namespaces = ip("netns", "list")
    return [name for name in [network.bridge_name, "mv" + network.tag] if name in links] + [
        line for line in namespaces.splitlines() if network.namespace(1).rsplit("-", 1)[0] in line
    ]


def test_teardown_removes_everything_it_created_also_after_a_failure() -> None:
    require_namespaces()
    network = Network([1, 2, 3])
    with pytest.raises(ZeroDivisionError), network:
        network.partition([1], [2])
        assert _leftovers(network)  # there while the network is up
        1 / 0  # noqa: B018
    assert _leftovers(network) == []


def test_a_torn_down_address_is_unreachable_not_routed_elsewhere() -> None:
    """A client left running after teardown gets "no route to host" at once; its connection
    never leaves the machine through the default route."""
    require_namespaces()
    with Network([1]) as network:
        address = network.address(1)
    with pytest.raises(OSError) as refused, socket.create_connection((address, PORT), timeout=5):
        pass
    assert refused.value.errno == errno.EHOSTUNREACH


def test_parallel_networks_get_different_names_and_subnets() -> None:
    require_namespaces()
    with Network([1]) as first, Network([1]) as second:
        assert first.namespace(1) != second.namespace(1)
        assert first.bridge_name != second.bridge_name
        assert first.subnet is not None and second.subnet is not None
        assert not first.subnet.overlaps(second.subnet)
