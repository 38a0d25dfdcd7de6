"""`moldau cluster up`: a local cluster of several `moldau server` processes in one command.

The steps a user would take by hand (README, "Running a cluster"), on loopback: pick ports (free
ones, or from `--base-port`), format one directory per node under `--data-dir` with one cluster
id, start the nodes as child processes, and print the bootstrap list once every node printed
its ready line. Ctrl-C or SIGTERM stops them: SIGTERM to each child by its PID (brokers without
a vote first, then the quorum's nodes), then a wait for their clean exits; a second Ctrl-C kills
them. The children run in their own process group, so a terminal's Ctrl-C reaches only this
process, which decides the order.

`<data-dir>/cluster.json` remembers the layout (cluster id, roles, ports, and with
`--controller-sasl` the nodes' controller password; the file is readable by its owner only): `up`
on the same directory starts the same cluster again. Each node's output goes to `<data-dir>/logs/node-N.log`.
While it runs, a node's exit is reported as it happens and `moldau cluster node stop | kill |
start | restart N` act on one node (`local_nodes.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from moldau.cli.common import ExitCode, counted, fail, stderr
from moldau.cli.local_nodes import STOP_TIMEOUT_S, ChildNode, LocalNodes, NodeLayout
from moldau.cli.storage import StorageFormatError, format_directories, new_cluster_id
from moldau.config.values import BrokerConfig, ConfigError

COMBINED = "broker,controller"
LAYOUT_FILE = "cluster.json"
CONTROLLER_PORT_OFFSET = 100  # with --base-port alone: node N's controller listener is base+100+N-1
# With --controller-sasl the nodes authenticate to each other's controller listeners as this user
# (SASL/PLAIN: the controllers must check it before any metadata, so SCRAM cannot serve there).
CONTROLLER_USER = "moldau-node"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    cluster_id: str
    host: str
    nodes: tuple[NodeLayout, ...]
    controller_password: str | None = None  # the controller listeners take SASL/PLAIN

    def voters(self) -> str:
        return ",".join(
            f"{n.node_id}@{self.host}:{n.controller_port}"
            for n in self.nodes
            if n.controller_port is not None
        )

    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{n.client_port}" for n in self.nodes if n.is_broker)

    def settings(self, node: NodeLayout, data_dir: Path, overrides: list[str]) -> list[str]:
        listeners = []
        if node.client_port is not None:
            listeners.append(f"PLAINTEXT://{self.host}:{node.client_port}")
        if node.controller_port is not None:
            listeners.append(f"CONTROLLER://{self.host}:{node.controller_port}")
        return [
            f"node.id={node.node_id}",
            f"process.roles={node.roles}",
            f"listeners={','.join(listeners)}",
            f"controller.quorum.voters={self.voters()}",
            f"log.dirs={data_dir / f'node-{node.node_id}'}",
            *self._controller_sasl(),
            *overrides,
        ]

    def _controller_sasl(self) -> list[str]:
        """Controller listeners that take only the nodes' own SASL/PLAIN login."""
        password = self.controller_password
        if password is None:
            return []
        return [
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.plain.sasl.jaas.config="
            f'{_PLAIN} required username="{CONTROLLER_USER}" password="{password}" '
            f'user_{CONTROLLER_USER}="{password}";',
        ]


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def plan(
    *,
    nodes: int,
    controllers: int,
    brokers: int,
    host: str,
    base_port: int | None,
    controller_base_port: int | None = None,
    controller_sasl: bool = False,
) -> ClusterLayout:
    """Roles and ports: `nodes` combined nodes, or `controllers` + `brokers` separate ones.
    Node N (from 1) listens for clients on `base_port`+N-1 and as a controller on
    `controller_base_port`+N-1 (default `base_port`+100+N-1); free ports where neither is given."""
    roles = [COMBINED] * nodes if nodes else ["controller"] * controllers + ["broker"] * brokers
    if controller_base_port is None and base_port is not None:
        controller_base_port = base_port + CONTROLLER_PORT_OFFSET

    def port(base: int | None, index: int) -> int:
        return base + index if base is not None else _free_port(host)

    layout = tuple(
        NodeLayout(
            node_id=index + 1,
            roles=role,
            client_port=port(base_port, index) if "broker" in role else None,
            controller_port=port(controller_base_port, index) if "controller" in role else None,
        )
        for index, role in enumerate(roles)
    )
    taken = [p for n in layout for p in (n.client_port, n.controller_port) if p is not None]
    clashing = sorted({p for p in taken if taken.count(p) > 1})
    if clashing:
        raise ValueError(
            f"port {clashing[0]} would serve two listeners: move --controller-base-port "
            f"(controllers take {_range(layout, 'controller_port')}, clients "
            f"{_range(layout, 'client_port')})"
        )
    too_high = [p for p in taken if p > 65535]
    if too_high:
        raise ValueError(f"port {too_high[0]} is above 65535: choose lower base ports")
    return ClusterLayout(
        cluster_id=new_cluster_id(),
        host=host,
        nodes=layout,
        controller_password=secrets.token_urlsafe(24) if controller_sasl else None,
    )


def _range(layout: tuple[NodeLayout, ...], field: str) -> str:
    ports = [getattr(n, field) for n in layout if getattr(n, field) is not None]
    return f"{min(ports)}-{max(ports)}" if ports else "none"


def load_layout(data_dir: Path) -> ClusterLayout | None:
    path = data_dir / LAYOUT_FILE
    if not path.exists():
        return None
    raw = json.loads(path.read_text(encoding="utf-8"))
    return ClusterLayout(
        cluster_id=raw["cluster_id"],
        host=raw["host"],
        nodes=tuple(NodeLayout(**node) for node in raw["nodes"]),
        controller_password=raw.get("controller_password"),
    )


def save_layout(data_dir: Path, layout: ClusterLayout) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(asdict(layout), indent=2) + "\n"
    path = data_dir / LAYOUT_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)


async def run_cluster(layout: ClusterLayout, data_dir: Path, overrides: list[str]) -> int:
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    children = [
        ChildNode(
            node,
            [
                sys.executable,
                "-m",
                "moldau",
                "server",
                *[a for s in layout.settings(node, data_dir, overrides) for a in ("--override", s)],
            ],
            logs / f"node-{node.node_id}.log",
        )
        for node in layout.nodes
    ]
    loop = asyncio.get_running_loop()
    stop_requests = asyncio.Queue[int]()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop_requests.put_nowait, number)
    nodes = LocalNodes(children, data_dir, say=lambda line: print(line, flush=True))
    try:
        await nodes.serve()
    except OSError as error:
        stderr.print(f"error: cannot listen for node commands: {error}", markup=False)
        return int(ExitCode.USAGE)
    try:
        for child in children:
            await nodes.start(child)
            node = child.layout
            addresses = ", ".join(
                f"{name}://{layout.host}:{port}"
                for name, port in (
                    ("PLAINTEXT", node.client_port),
                    ("CONTROLLER", node.controller_port),
                )
                if port is not None
            )
            print(
                f"node {node.node_id} ({node.roles}): {addresses}, log {child.log_path}", flush=True
            )
        ready = await _wait_ready(children, stop_requests)
        if ready:
            print(
                f"Moldau cluster ready: bootstrap.servers={layout.bootstrap_servers()} "
                f"(controllers {layout.voters()}); `moldau cluster node stop | kill | start | "
                f"restart N -d {data_dir}` acts on one node; Ctrl-C stops every node",
                flush=True,
            )
            await stop_requests.get()
        await nodes.close()
        stopped = await _stop(children, stop_requests)
        return int(ExitCode.KAFKA_ERROR) if ready is None else stopped
    finally:
        await nodes.close()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)


async def _wait_ready(children: list[ChildNode], stop_requests: asyncio.Queue[int]) -> bool | None:
    """True once every node is ready; False when a stop is asked for first; None when a node
    exits first."""
    waiters = {asyncio.ensure_future(c.ready.wait()): c for c in children}
    exits = {asyncio.ensure_future(c.wait()): c for c in children}
    stop = asyncio.ensure_future(stop_requests.get())
    pending = set(waiters)
    try:
        while pending:
            done, _ = await asyncio.wait(
                pending | set(exits) | {stop}, return_when=asyncio.FIRST_COMPLETED
            )
            if stop in done:
                return False
            for finished in done & set(exits):
                child = exits[finished]
                stderr.print(
                    f"[bold red]error:[/] node {child.layout.node_id} exited with code "
                    f"{finished.result()} before it was ready; its log ends:\n"
                    f"{escape(child.log_tail())}",
                    markup=True,
                )
                return None
            pending -= done
        return True
    finally:
        for future in [*waiters, *exits, stop]:
            future.cancel()


async def _stop(children: list[ChildNode], stop_requests: asyncio.Queue[int]) -> int:
    """SIGTERM to brokers without a vote, then to the quorum's nodes; a clean exit is code 0.
    Another Ctrl-C (or the timeout) kills what is left."""
    running = [c for c in children if c.running]  # (a node stopped or killed by hand is not)
    groups = [
        [c for c in running if "controller" not in c.layout.roles],
        [c for c in running if "controller" in c.layout.roles],
    ]
    codes: dict[int, int] = {}
    for group in groups:
        if not group:
            continue
        for child in group:
            child.signal(signal.SIGTERM)
        waiting: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(c.wait() for c in group))
        )
        interrupted: asyncio.Future[Any] = asyncio.ensure_future(stop_requests.get())
        done, _ = await asyncio.wait(
            {waiting, interrupted}, timeout=STOP_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        interrupted.cancel()
        if waiting not in done:
            stderr.print("killing the nodes that have not stopped", markup=False)
            for child in group:
                child.signal(signal.SIGKILL)
        for child, code in zip(group, await waiting, strict=True):
            codes[child.layout.node_id] = code
    failed = {node_id: code for node_id, code in codes.items() if code != 0}
    if failed:
        stderr.print(f"nodes that did not stop cleanly (node: exit code): {failed}", markup=False)
        return int(ExitCode.KAFKA_ERROR)
    print(f"stopped {counted(len(codes), 'node')}", flush=True)
    return 0


def up(
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", "-n", help="Combined nodes (broker and controller each); default 3."
        ),
    ] = None,
    controllers: Annotated[
        int, typer.Option("--controllers", help="Controller-only nodes (with --brokers).")
    ] = 0,
    brokers: Annotated[
        int, typer.Option("--brokers", help="Broker-only nodes (with --controllers).")
    ] = 0,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", "-d", help="Where every node keeps its data.")
    ] = Path("moldau-cluster"),
    base_port: Annotated[
        int | None,
        typer.Option(
            "--base-port",
            help="Node N listens for clients on BASE+N-1 (and as a controller on BASE+100+N-1 "
            "unless --controller-base-port is given); default: free ports.",
            show_default=False,
        ),
    ] = None,
    controller_base_port: Annotated[
        int | None,
        typer.Option(
            "--controller-base-port",
            help="Node N's controller listener is on PORT+N-1; default: BASE+100 with "
            "--base-port, else free ports.",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The address every node binds.")] = (
        "127.0.0.1"
    ),
    controller_sasl: Annotated[
        bool,
        typer.Option(
            "--controller-sasl",
            help="Controller listeners take only the nodes' own SASL/PLAIN login (a password "
            "made for this cluster, kept in its cluster.json): clients that reach a controller "
            "port cannot speak to the quorum.",
        ),
    ] = False,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", help="A property for every node: key=value (repeatable)."),
    ] = None,
) -> None:
    """Start a local cluster: format, start every node, print the bootstrap list; Ctrl-C stops it."""
    separate = bool(controllers or brokers)
    if separate and (nodes is not None or controllers < 1 or brokers < 1):
        fail("--controllers and --brokers go together (at least one of each), without --nodes")
    if nodes is not None and nodes < 1:
        fail("--nodes must be at least 1")
    asked = (0, controllers, brokers) if separate else None if nodes is None else (nodes, 0, 0)
    data_dir = data_dir.resolve()
    layout = load_layout(data_dir)
    if layout is None:
        shape = asked or (3, 0, 0)
        try:
            layout = plan(
                nodes=shape[0],
                controllers=shape[1],
                brokers=shape[2],
                host=host,
                base_port=base_port,
                controller_base_port=controller_base_port,
                controller_sasl=controller_sasl,
            )
        except ValueError as error:
            fail(str(error))
    elif controller_sasl and layout.controller_password is None:
        fail(
            f"{data_dir} holds a cluster whose controller listeners take no login: start it "
            "without --controller-sasl, or give another --data-dir"
        )
    elif asked is not None and asked != _shape(layout):
        fail(
            f"{data_dir} holds a cluster of {_describe(layout)}: start it as it is (without "
            "--nodes, --controllers, --brokers), or give another --data-dir"
        )
    for node in layout.nodes:
        try:
            config = BrokerConfig.load(
                overrides=layout.settings(node, data_dir, list(override or ())), environ={}
            )
            format_directories(config, layout.cluster_id)
        except (ConfigError, StorageFormatError, OSError) as exc:
            fail(f"node {node.node_id}: {exc}")
    save_layout(data_dir, layout)
    print(f"cluster {layout.cluster_id}: {_describe(layout)} under {data_dir}", flush=True)
    raise typer.Exit(asyncio.run(run_cluster(layout, data_dir, list(override or ()))))


def _shape(layout: ClusterLayout) -> tuple[int, int, int]:
    roles = [n.roles for n in layout.nodes]
    if all(r == COMBINED for r in roles):
        return (len(roles), 0, 0)
    return (0, roles.count("controller"), roles.count("broker"))


def _describe(layout: ClusterLayout) -> str:
    nodes, controllers, brokers = _shape(layout)
    if nodes:
        return f"{counted(nodes, 'combined node')}"
    return f"{counted(controllers, 'controller')} and {counted(brokers, 'broker')}"
