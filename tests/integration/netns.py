"""Network namespaces for a test cluster: each node in a namespace of its own, reached through a
bridge in the root namespace, and links between nodes cut with routes (Jepsen's partitions).

Layout, for one `Network` (names carry the test process's pid and a sequence number, so parallel
runs never share one):

    root namespace:   bridge mb<pid>s<seq>, address <subnet>.1/24 (the clients stay here)
                      veth mv<pid>s<seq>n<id> of each node, a port of the bridge
    moldau-<pid>-<seq>-n<id>:  lo up; eth0, the veth's other end, address <subnet>.<id + 1>/24

The subnet is a /24 of 198.18.0.0/15 (RFC 2544's range for network tests), the first one from a
pid-derived start that no address or route of the root namespace uses. A cut from A to B is a
blackhole route to B's address in A's namespace: A's packets to B are dropped (an established
connection stalls until its timeouts, a new one fails at once); a full partition is a cut in both
directions. A slow link from A to B is a rate-capped HTB class with a short byte-limited queue on
A's eth0 for packets to B's address (`slow`). Teardown removes every namespace, veth and the
bridge this object created, and only those, also after a failure halfway through setup.

The subnet also gets an `unreachable` route in the root namespace (metric GUARD_METRIC, behind the
bridge's own route while the bridge exists), kept until this process has exited: a client the test
left behind (the chaos job abandons a producer stuck in librdkafka) that still tries a node's
address after teardown is answered "no route to host" here, instead of its connection going out
through the default route to an address that is no node's.
"""

from __future__ import annotations

import atexit
import fcntl
import ipaddress
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import pytest

RANGE = ipaddress.ip_network("198.18.0.0/15")
SUBNETS = list(RANGE.subnets(new_prefix=24))
LOCK_PATH = Path("/tmp/moldau-netns.lock")  # subnet choice and bridge address, one at a time
IFNAME_MAX = 15  # Linux's IFNAMSIZ - 1
GUARD_METRIC = "4242"
_sequence = itertools.count(1)
_guarded: list[str] = []  # this process's guard routes, removed when it exits


class NamespacesUnavailable(RuntimeError):
    """This machine cannot give a test network namespaces (not root, no `ip`, no permission)."""


def ip(*arguments: str) -> str:
    """Run `ip ARGUMENTS`; its stdout, or an error naming the command and its stderr."""
    return _run("ip", *arguments)


def tc(*arguments: str) -> str:
    """Run `tc ARGUMENTS` (iproute2's traffic control) the same way."""
    return _run("tc", *arguments)


def _run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result.stdout


_unavailable: list[str | None] = []  # the probe's answer, once per process


def namespaces_unavailable() -> str | None:
    """Why this process cannot create network namespaces, or None when it can (probed once, by
    creating and deleting a namespace of its own)."""
    if _unavailable:
        return _unavailable[0]
    reason = None
    if shutil.which("ip") is None:
        reason = "the `ip` command (iproute2) is not installed"
    elif os.geteuid() != 0:
        reason = "network namespaces need root"
    else:
        probe = f"moldau-{os.getpid()}-probe"
        try:
            ip("netns", "add", probe)
            ip("netns", "delete", probe)
        except RuntimeError as error:
            reason = f"cannot create a network namespace: {error}"
    _unavailable.append(reason)
    return reason


def require_namespaces() -> None:
    """Skip the calling test, saying why, when namespaces cannot be created here."""
    reason = namespaces_unavailable()
    if reason is not None:
        pytest.skip(f"needs network namespaces: {reason}")


class Network:
    """One namespace per node of `node_ids`, a bridge joining them to the root namespace, and the
    cuts between nodes. A context manager: entering creates everything, leaving removes it."""

    def __init__(self, node_ids: Iterable[int]) -> None:
        self.node_ids = sorted(node_ids)
        pid, sequence = os.getpid(), next(_sequence) % 100
        self.tag = f"{pid}s{sequence}"
        self.bridge_name = f"mb{self.tag}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.cuts: set[tuple[int, int]] = set()  # (source, destination): source's packets dropped
        self.slow_links: set[tuple[int, int]] = set()  # (source, destination): through a bucket
        self._namespace_prefix = f"moldau-{pid}-{sequence}"
        self._created_namespaces: list[str] = []
        self._created_links: list[str] = []  # root-namespace ends; deleting one deletes its pair
        for name in [self.bridge_name, *map(self._veth, self.node_ids)]:
            assert len(name) <= IFNAME_MAX, f"interface name {name} is too long"

    def namespace(self, node_id: int) -> str:
        return f"{self._namespace_prefix}-n{node_id}"

    def address(self, node_id: int) -> str:
        assert self.subnet is not None, "the network is not set up"
        return str(self.subnet.network_address + node_id + 1)

    def exec_prefix(self, node_id: int) -> list[str]:
        """The command prefix that runs a program in the node's namespace (`ip netns exec` execs
        it: the process keeps the PID it was started with, and the environment)."""
        return ["ip", "netns", "exec", self.namespace(node_id)]

    def __enter__(self) -> Network:
        reason = namespaces_unavailable()
        if reason is not None:
            raise NamespacesUnavailable(reason)
        try:
            self._set_up()
        except BaseException:
            self.tear_down()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.tear_down()

    def _veth(self, node_id: int) -> str:
        return f"mv{self.tag}n{node_id}"

    def _set_up(self) -> None:
        with _locked():
            self.subnet = _free_subnet(start=os.getpid() * 7 + int(self.tag.split("s")[1]))
            _guard(str(self.subnet))
            ip("link", "add", self.bridge_name, "type", "bridge")
            self._created_links.append(self.bridge_name)
            ip("addr", "add", f"{self.subnet.network_address + 1}/24", "dev", self.bridge_name)
        ip("link", "set", self.bridge_name, "up")
        for node_id in self.node_ids:
            namespace, veth, peer = (
                self.namespace(node_id),
                self._veth(node_id),
                f"mp{self.tag}n{node_id}",
            )
            ip("netns", "add", namespace)
            self._created_namespaces.append(namespace)
            ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            self._created_links.append(veth)
            ip("link", "set", peer, "netns", namespace)
            ip("-n", namespace, "link", "set", peer, "name", "eth0")
            ip("-n", namespace, "addr", "add", f"{self.address(node_id)}/24", "dev", "eth0")
            ip("-n", namespace, "link", "set", "lo", "up")
            ip("-n", namespace, "link", "set", "eth0", "up")
            ip("link", "set", veth, "master", self.bridge_name, "up")

    def tear_down(self) -> None:
        """Remove what this object created (veths first, so no node is left on the bridge);
        every removal is tried, and the first failure is raised after the others."""
        removals = [("link", "delete", link) for link in reversed(self._created_links)]
        removals += [("netns", "delete", name) for name in reversed(self._created_namespaces)]
        self._created_links.clear()
        self._created_namespaces.clear()
        self.cuts.clear()
        self.slow_links.clear()
        failures = []
        for removal in removals:
            try:
                ip(*removal)
            except RuntimeError as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def cut(self, source: int, destination: int) -> None:
        """`source`'s packets to `destination` are dropped (the other direction still flows)."""
        if (source, destination) in self.cuts:
            return
        ip(
            "-n",
            self.namespace(source),
            "route",
            "add",
            "blackhole",
            f"{self.address(destination)}/32",
        )
        self.cuts.add((source, destination))

    def one_way(self, source: int, destination: int) -> None:
        self.cut(source, destination)

    def partition(self, group_a: Iterable[int], group_b: Iterable[int]) -> None:
        """No packet between a node of `group_a` and one of `group_b`, either way."""
        group_b = list(group_b)
        for a in group_a:
            for b in group_b:
                self.cut(a, b)
                self.cut(b, a)

    def isolate(self, node_id: int) -> None:
        """`node_id` cut from every other node (clients still reach it through the bridge)."""
        self.partition([node_id], [n for n in self.node_ids if n != node_id])

    def bridge(self, half_a: Iterable[int], middle: int, half_b: Iterable[int]) -> None:
        """Jepsen's bridge: the two halves cannot talk to each other; `middle` talks to both."""
        assert middle not in half_a and middle not in half_b
        self.partition(half_a, half_b)

    def slow(
        self, source: int, destinations: Iterable[int], *, rate_kbit: int, queue_ms: int
    ) -> None:
        """`source`'s packets to `destinations` share a token bucket of `rate_kbit` whose queue
        holds `queue_ms` of them (more is dropped): a slow, congested link, its delay the
        queue's (this kernel has no netem). An HTB class on the namespace's eth0, chosen by
        destination address (u32), with a byte-limited FIFO; other traffic passes untouched.
        A source has one bucket until `heal`: a later call adds destinations to it, at its cap."""
        namespace = self.namespace(source)

        def on_eth0(what: str, *arguments: str) -> None:
            tc("-n", namespace, what, "add", "dev", "eth0", *arguments)

        if not any(link[0] == source for link in self.slow_links):
            on_eth0("qdisc", "root", "handle", "1:", "htb", "default", "1")
            on_eth0("class", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit")
            rate = f"{rate_kbit}kbit"
            on_eth0("class", "parent", "1:", "classid", "1:2", "htb", "rate", rate, "ceil", rate)
            limit = max(3028, rate_kbit * 1000 // 8 * queue_ms // 1000)  # two packets at least
            on_eth0("qdisc", "parent", "1:2", "handle", "2:", "bfifo", "limit", str(limit))
        for destination in destinations:
            if (source, destination) in self.slow_links:
                continue
            address = f"{self.address(destination)}/32"
            on_eth0("filter", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", "dst", address, "flowid", "1:2")  # fmt: skip
            self.slow_links.add((source, destination))

    def heal(self) -> None:
        """Every cut and every slow link removed."""
        for source, destination in sorted(self.cuts):
            ip("-n", self.namespace(source), "route", "delete", "blackhole",
               f"{self.address(destination)}/32")  # fmt: skip
            self.cuts.discard((source, destination))
        for source in sorted({source for source, _destination in self.slow_links}):
            tc("-n", self.namespace(source), "qdisc", "delete", "dev", "eth0", "root")
        self.slow_links.clear()


def _guard(subnet: str) -> None:
    """Route `subnet` nowhere, behind any other route to it, until this process exits."""
    ip("route", "add", "unreachable", subnet, "metric", GUARD_METRIC)
    if not _guarded:
        atexit.register(_remove_guards)
    _guarded.append(subnet)


def _remove_guards() -> None:
    """At exit: the guards go once this process has gone, not before, as librdkafka threads of
    clients it never closed still run while the interpreter exits (a detached watcher waits for
    the PID to end, then deletes them)."""
    removals = "; ".join(
        f"ip route delete unreachable {subnet} metric {GUARD_METRIC}" for subnet in _guarded
    )
    subprocess.Popen(
        ["sh", "-c", f"tail --pid={os.getpid()} -f /dev/null; {removals}"],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _guarded.clear()


@contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _free_subnet(*, start: int) -> ipaddress.IPv4Network:
    """The first /24 of RANGE from `start` (modulo) that no root-namespace address or route
    overlaps."""
    used = []
    for line in (
        ip("-4", "-o", "addr", "show") + ip("-4", "route", "show", "table", "all")
    ).splitlines():
        for word in line.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
    for index in range(len(SUBNETS)):
        subnet = SUBNETS[(start + index) % len(SUBNETS)]
        if not any(subnet.overlaps(network) for network in used if network.prefixlen > 0):
            return subnet
    raise RuntimeError(f"every /24 of {RANGE} is in use")
