"""`moldau cluster up`: a local cluster in one command, as a user runs it — ready line with the
bootstrap list, clients served, `cluster info` on it, Ctrl-C stopping every node cleanly."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol.adapter import encode_request

from .test_cli_support import _command, _environment, moldau

pytestmark = pytest.mark.timeout(180)

READY = re.compile(r"Moldau cluster ready: bootstrap\.servers=(\S+)")


def _node_pids(data_dir: Path) -> list[int]:
    """Processes whose command line names this test's data directory (its nodes)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b" server " in command and str(data_dir).encode() in command:
            pids.append(int(entry.name))
    return pids


class ClusterUp:
    def __init__(self, *arguments: str) -> None:
        self.process = subprocess.Popen(
            _command(("cluster", "up", *arguments), None),
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.bootstrap = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = READY.search(line)
            if match:
                self.bootstrap = match.group(1)
                self.ready.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout_s: float = 90) -> str:
        assert self.ready.wait(timeout_s), self.output
        return self.bootstrap

    def interrupt(self, data_dir: Path) -> tuple[int, list[int]]:
        """Ctrl-C (SIGINT) and wait: the exit code, and the nodes left running (then killed,
        by PID: only this test's)."""
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(90)
        finally:
            leftovers = _node_pids(data_dir)
            for pid in leftovers:
                os.kill(pid, signal.SIGKILL)
        return code, leftovers


def test_cluster_up_serves_clients_and_ctrl_c_stops_every_node(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    up = ClusterUp("--nodes", "3", "--data-dir", str(data_dir))
    try:
        bootstrap = up.wait_ready()
        assert len(bootstrap.split(",")) == 3
        assert len(_node_pids(data_dir)) == 3
        assert sorted(p.name for p in (data_dir / "logs").iterdir()) == [
            "node-1.log",
            "node-2.log",
            "node-3.log",
        ]
        info = moldau("cluster", "info", "--format", "json", bootstrap=bootstrap).json()
        assert [(b["node_id"], b["fenced"]) for b in info["brokers"]] == [
            (1, False),
            (2, False),
            (3, False),
        ]
        assert sorted(c["node_id"] for c in info["controllers"]) == [1, 2, 3]
        # The quorum's leader shows its directory id as the followers do theirs.
        assert all(c["directory_id"] for c in info["controllers"]), info["controllers"]
        controller = re.search(r"CONTROLLER://(\S+?)[,\s]", up.output)
        assert controller is not None, up.output
        wrong = moldau("topic", "list", bootstrap=controller[1], expect=2)
        assert wrong.stderr == (
            f"error: {controller[1]} is a controller listener, which serves the metadata quorum, "
            f"not clients; the brokers listen on {bootstrap} (MISMATCHED_ENDPOINT_TYPE); give a "
            "broker listener with -b HOST:PORT (controller listeners are for "
            "--bootstrap-controller)\n"
        )
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("greetings", 3, 3)])["greetings"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for index in range(30):
            producer.produce("greetings", value=b"hello %d" % index)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "readers",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["greetings"])
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert len(seen) == 30
    finally:
        code, leftovers = up.interrupt(data_dir)
    assert code == 0, up.output
    assert "stopped 3 nodes" in up.output
    assert leftovers == []


def test_cluster_up_reports_a_node_that_cannot_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            _command(
                ("cluster", "up", "--nodes", "1", "--base-port", str(port), "-d", str(tmp_path)),
                None,
            ),
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "node 1 exited with code" in result.stderr
    assert "Moldau cluster ready" not in result.stdout
    assert _node_pids(tmp_path) == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_line(up: ClusterUp, text: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in up.output:
        assert time.monotonic() < deadline, f"no {text!r} in:\n{up.output}"
        assert up.process.poll() is None, up.output
        time.sleep(0.05)  # (polling the reader's lines, not waiting for the cluster)


def test_one_node_is_killed_started_stopped_and_restarted_while_cluster_up_runs(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "cluster"
    controller_port = _free_port()
    up = ClusterUp("--nodes", "1", "--controller-base-port", str(controller_port),
                   "--data-dir", str(data_dir))  # fmt: skip
    try:
        bootstrap = up.wait_ready()
        assert f"CONTROLLER://127.0.0.1:{controller_port}, log" in up.output  # placed as asked
        node = ("cluster", "node")
        where = ("-d", str(data_dir))
        killed = moldau(*node, "kill", "1", *where, bootstrap=None)
        assert killed.text == "node 1 killed (exit code -9 (SIGKILL))\n"
        _wait_for_line(up, "node 1 exited with code -9 (SIGKILL); last log line: ")
        assert _node_pids(data_dir) == []
        refused = moldau(*node, "stop", "1", *where, bootstrap=None, expect=1)
        assert refused.stderr == "error: node 1 is not running\n"

        assert moldau(*node, "start", "1", *where, bootstrap=None).text == (
            "node 1 started and ready\n"
        )
        moldau("topic", "create", "after-restart", bootstrap=bootstrap)
        assert moldau(*node, "restart", "1", *where, bootstrap=None).text == (
            "node 1 restarted and ready\n"
        )
        _wait_for_line(up, "node 1 exited with code 0; last log line: ")
        listed = moldau("topic", "list", bootstrap=bootstrap).text.split()
        assert "after-restart" in listed
        assert moldau(*node, "stop", "1", *where, bootstrap=None).text == (
            "node 1 stopped (exit code 0)\n"
        )
        missing = moldau(*node, "kill", "7", *where, bootstrap=None, expect=1)
        assert missing.stderr == "error: no node 7 (nodes 1)\n"
    finally:
        code, leftovers = up.interrupt(data_dir)
    assert code == 0, up.output
    assert "stopped 0 nodes" in up.output  # node 1 was already stopped by hand
    assert leftovers == []
    nobody = moldau("cluster", "node", "kill", "1", "-d", str(data_dir), bootstrap=None, expect=3)
    assert nobody.stderr.startswith(f"error: no `moldau cluster up` runs from {data_dir}")


def test_controller_ports_that_clash_with_client_ports_are_refused(tmp_path: Path) -> None:
    refused = moldau("cluster", "up", "--nodes", "3", "--base-port", "41000",
                     "--controller-base-port", "41002", "-d", str(tmp_path / "c"),
                     bootstrap=None, expect=2)  # fmt: skip
    assert refused.stderr == (
        "error: port 41002 would serve two listeners: move --controller-base-port (controllers "
        "take 41002-41004, clients 41000-41002)\n"
    )


def test_controller_listeners_take_only_the_nodes_own_login(tmp_path: Path) -> None:
    """`--controller-sasl`: the quorum runs over SASL/PLAIN with a password made for the cluster;
    clients work through the brokers, and an anonymous quorum message to a controller port (the
    forged BeginQuorumEpoch of a hostile-input probe) closes its connection unanswered."""
    data_dir = tmp_path / "cluster"
    up = ClusterUp("--nodes", "3", "--controller-sasl", "--data-dir", str(data_dir))
    try:
        bootstrap = up.wait_ready()
        layout = data_dir / "cluster.json"
        assert layout.stat().st_mode & 0o777 == 0o600
        info = moldau("cluster", "info", "--format", "json", bootstrap=bootstrap).json()
        assert sorted(c["node_id"] for c in info["controllers"]) == [1, 2, 3]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("behind-sasl", 1, 3)])["behind-sasl"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        producer.produce("behind-sasl", value=b"replicated")
        assert producer.flush(30) == 0
        controller = re.search(r"CONTROLLER://([^:\s]+):(\d+)", up.output)
        assert controller is not None, up.output
        forged = encode_request(
            53,
            0,
            1,
            "probe",
            {
                "cluster_id": None,
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [{"partition_index": 0, "leader_id": 2, "leader_epoch": 1}],
                    }
                ],
            },
        )
        with socket.create_connection((controller[1], int(controller[2])), timeout=10) as sock:
            sock.sendall(forged)
            assert sock.recv(1) == b""  # closed, unanswered: only SASL before authentication
    finally:
        code, leftovers = up.interrupt(data_dir)
    assert code == 0, up.output
    assert leftovers == []
