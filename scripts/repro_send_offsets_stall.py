"""By-hand diagnosis: does a librdkafka transactional producer stay in
`send_offsets_to_transaction` past its timeout when the group coordinator dies, and is that the
client (confluentinc/librdkafka#5456, #5511) or a Moldau answer?

    PYTHONPATH=. .venv/bin/python scripts/repro_send_offsets_stall.py VARIANT [--wait 30]
        [--restart-after-hang] [--out DIR]

Not a test: it prints a timeline and leaves the logs in DIR (default /tmp/stall-repro/VARIANT-*):
node-N.log (each Moldau node's output), client-debug.log (librdkafka debug `eos,broker,protocol,
metadata` of the transactional producer; every client's stderr goes there too).

Steps: a 3-node combined cluster (session 3 s, heartbeat 0.5 s, 3 partitions per internal topic);
topics `in` and `out` (1 partition, RF 3, min.insync.replicas 2); a transactional id whose
coordinator T and a group G whose coordinator differs from T (found with raw FindCoordinator v1
requests, see `find_coordinator`); a transactional producer (transaction.timeout.ms 10000) runs one
full transaction with send_offsets_to_transaction (so the group coordinator is cached in the
client), begins a second one and produces one record (cold: after the faults); then, by VARIANT:

  listed          SIGKILL G's coordinator, call at once (dead but still registered);
  fenced          SIGKILL it, wait until a Metadata answer (an AdminClient) no longer lists it,
                  then call (the producer's own metadata may still list it);
  decommissioned  as fenced, then the producer itself fetches metadata (producer.list_topics), so
                  librdkafka decommissions the dead broker (#5511), then call;
  cold            after the first transaction SIGKILL all three and restart them, then begin
                  the second transaction, produce, and call (librdkafka re-bootstraps meanwhile:
                  every known broker, the cached group coordinator too, is decommissioned).

The call is `send_offsets_to_transaction(offsets, group_metadata, 5)` in a thread; the script
waits --wait seconds for it to return. With --restart-after-hang, a killed node is started again
if the call is still inside, and the script waits --wait more. Meanwhile a probe thread asks every
live node FindCoordinator(G) once a second (raw, v1) and prints each change of answer, to check
Moldau's answers independently of the client. Before the faults a raw TxnOffsetCommit v0 goes to
the node that coordinates neither G nor the transactional id (Kafka answers NOT_COORDINATOR, 16).
Exit status: 0 the call returned within --wait, 2 it did not, 3 it returned only after the restart.

Observed on 15d9c0f, confluent-kafka 2.16.1 / librdkafka 2.16.0 (2 runs each, 3 of
decommissioned): listed and fenced return (success, 0.3-3.4 s); decommissioned and cold stay in
the call past 30 s (decommissioned: still 30 s after the killed node was restarted). In the hung
runs the producer's last requests are AddOffsetsToTxn (NO_ERROR) and a CONNECT to the cached,
decommissioned coordinator's broker handle; it sends no FindCoordinator or TxnOffsetCommit until
another broker connection changes state (here: the cluster being stopped).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

SESSION_MS = 3000
TXN_ID = "repro-txn"
ERRORS = {0: "NONE", 15: "COORDINATOR_NOT_AVAILABLE", 14: "COORDINATOR_LOAD_IN_PROGRESS",
          16: "NOT_COORDINATOR", 48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING",
          47: "INVALID_PRODUCER_EPOCH", 90: "PRODUCER_FENCED"}  # fmt: skip
T0 = time.time()


def say(text: str) -> None:
    now = time.time()
    print(f"[{now:.3f} +{now - T0:6.2f}s] {text}", flush=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """Three combined `moldau server` processes (adapted from bench/cluster.py: output to files)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ports = {i: (_free_port(), _free_port()) for i in (1, 2, 3)}
        voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in self.ports.items())
        self.overrides = {
            i: [
                f"node.id={i}",
                f"listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                f"controller.quorum.voters={voters}",
                f"log.dirs={base / f'data-{i}'}",
                f"broker.session.timeout.ms={SESSION_MS}",
                "broker.heartbeat.interval.ms=500",
                "offsets.topic.num.partitions=3",
                "transaction.state.log.num.partitions=3",
            ]
            for i, (p, c) in self.ports.items()
        }
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, Any] = {}
        cluster_id = subprocess.run(
            [sys.executable, "-m", "moldau", "storage", "random-uuid"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        for settings in self.overrides.values():
            subprocess.run(
                [sys.executable, "-m", "moldau", "storage", "format", "-t", cluster_id,
                 *_arguments(settings)],
                check=True, capture_output=True,
            )  # fmt: skip

    def address(self, node: int) -> tuple[str, int]:
        return "127.0.0.1", self.ports[node][0]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p, _ in self.ports.values())

    def start(self, *nodes: int) -> None:
        for node in nodes:
            log = open(self.base / f"node-{node}.log", "ab")  # noqa: SIM115
            log.write(f"==== start at {time.time():.3f}\n".encode())
            log.flush()
            self.logs[node] = log
            self.processes[node] = subprocess.Popen(
                [sys.executable, "-m", "moldau", "server", *_arguments(self.overrides[node])],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            say(f"node {node} started, pid {self.processes[node].pid}")
        for node in nodes:
            self._wait_ready(node)

    def _wait_ready(self, node: int) -> None:
        path = self.base / f"node-{node}.log"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = path.read_text(errors="replace")
            if "Moldau ready" in text.rsplit("==== start at", 1)[-1]:
                say(f"node {node} ready")
                return
            if self.processes[node].poll() is not None:
                raise RuntimeError(f"node {node} exited: see {path}")
            time.sleep(0.2)
        raise RuntimeError(f"node {node} not ready in 60 s")

    def kill(self, node: int) -> None:
        process = self.processes[node]
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        say(f"node {node} SIGKILLed (pid {process.pid})")

    def alive(self) -> list[int]:
        return [n for n, p in self.processes.items() if p.poll() is None]

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for node, process in self.processes.items():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            say(f"node {node} stopped (pid {process.pid}, rc {process.returncode})")


def _arguments(settings: list[str]) -> list[str]:
    return [part for setting in settings for part in ("--override", setting)]


# ------------------------------------------------------------------ raw requests (non-flexible)


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _request(address: tuple[str, int], api_key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhi", api_key, version, 7) + _string("repro-probe")
    message = header + body
    with socket.create_connection(address, timeout=3) as connection:
        connection.sendall(struct.pack(">i", len(message)) + message)
        size = struct.unpack(">i", _read(connection, 4))[0]
        response = _read(connection, size)
    assert struct.unpack(">i", response[:4])[0] == 7
    return response[4:]


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def find_coordinator(address: tuple[str, int], key: str, key_type: int) -> tuple[int, int, str]:
    """FindCoordinator v1: (error code, node id, host:port)."""
    body = _request(address, 10, 1, _string(key) + struct.pack(">b", key_type))
    _throttle, error = struct.unpack(">ih", body[:6])
    rest = body[6:]
    (length,) = struct.unpack(">h", rest[:2])
    rest = rest[2 + max(length, 0) :]
    (node,) = struct.unpack(">i", rest[:4])
    (host_length,) = struct.unpack(">h", rest[4:6])
    host = rest[6 : 6 + host_length].decode()
    (port,) = struct.unpack(">i", rest[6 + host_length : 10 + host_length])
    return error, node, f"{host}:{port}"


def txn_offset_commit(address: tuple[str, int], group: str, topic: str) -> int:
    """TxnOffsetCommit v0 with producer id 12345 epoch 0: the error code of the one partition."""
    body = (
        _string(TXN_ID) + _string(group) + struct.pack(">qh", 12345, 0)
        + struct.pack(">i", 1) + _string(topic)
        + struct.pack(">i", 1) + struct.pack(">iq", 0, 1) + _string(None)
    )  # fmt: skip
    response = _request(address, 28, 0, body)
    # throttle i32, topics [1]: name, partitions [1]: index i32, error i16
    (name_length,) = struct.unpack(">h", response[8:10])
    offset = 10 + name_length + 4 + 4
    return int(struct.unpack(">h", response[offset : offset + 2])[0])


def coordinator_of(cluster: Cluster, key: str, key_type: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for node in cluster.alive():
            try:
                error, coordinator, _ = find_coordinator(cluster.address(node), key, key_type)
            except OSError:
                continue
            if error == 0:
                return coordinator
        time.sleep(0.3)
    raise RuntimeError(f"no coordinator for {key}")


class Probe(threading.Thread):
    """FindCoordinator(group) to every live node once a second; prints each change of answer."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.group = cluster, group
        self.stopping = threading.Event()
        self.last: dict[int, str] = {}

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            for node in (1, 2, 3):
                try:
                    error, coordinator, endpoint = find_coordinator(
                        self.cluster.address(node), self.group, 0
                    )
                    answer = f"{ERRORS.get(error, error)} node {coordinator} {endpoint}"
                except OSError as exc:
                    answer = f"no answer ({type(exc).__name__})"
                if self.last.get(node) != answer:
                    self.last[node] = answer
                    say(f"probe: node {node} FindCoordinator(group {self.group}) -> {answer}")


def brokers_listed(admin: AdminClient) -> list[int]:
    return sorted(admin.list_topics(timeout=5).brokers)


def wait_unlisted(admin: AdminClient, node: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            listed = brokers_listed(admin)
        except KafkaException:
            listed = [node]
        if node not in listed:
            say(f"Metadata (AdminClient) lists brokers {listed}: node {node} gone")
            return
        time.sleep(0.2)
    raise RuntimeError(f"node {node} still listed after 30 s")


def wait_partitions_led(admin: AdminClient, topics: list[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=5).topics
            if all(
                t in metadata and metadata[t].partitions and all(
                    p.leader >= 0 for p in metadata[t].partitions.values())
                for t in topics
            ):  # fmt: skip
                return
        except KafkaException:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"no leader for {topics}")


def call_send_offsets(
    producer: Producer, consumer: Consumer, offset: int, timeout: float
) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def call() -> None:
        result["start"] = time.monotonic()
        say(f"send_offsets_to_transaction(in[0]@{offset}, timeout {timeout}) called")
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition("in", 0, offset)], consumer.consumer_group_metadata(), timeout
            )
            result["outcome"] = "success"
        except KafkaException as exception:
            error = exception.args[0]
            result["outcome"] = (
                f"error {error.name()} ({error.str()}) retriable={error.retriable()} "
                f"abortable={error.txn_requires_abort()} fatal={error.fatal()}"
            )
        result["elapsed"] = time.monotonic() - result["start"]
        say(f"send_offsets_to_transaction returned after {result['elapsed']:.2f} s: "
            f"{result['outcome']}")  # fmt: skip

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", choices=["listed", "fenced", "decommissioned", "cold"])
    parser.add_argument("--wait", type=float, default=30.0)
    parser.add_argument("--call-timeout", type=float, default=5.0)
    parser.add_argument("--restart-after-hang", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or Path(f"/tmp/stall-repro/{args.variant}-{time.strftime('%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    # librdkafka logs to fd 2 from its own threads: send that to a file, keep ours on stdout.
    saved = os.dup(2)
    debug_log = os.open(out / "client-debug.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(debug_log, 2)
    sys.stderr = os.fdopen(saved, "w", buffering=1)
    say(f"variant {args.variant}, logs in {out}")

    cluster = Cluster(out)
    exit_code = 0
    try:
        cluster.start(1, 2, 3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name in ("in", "out"):
            admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[
                name
            ].result(30)
        wait_partitions_led(admin, ["in", "out"])
        txn_coordinator = coordinator_of(cluster, TXN_ID, 1)
        group, group_coordinator = "", -1
        for index in range(50):
            group = f"repro-group-{index}"
            group_coordinator = coordinator_of(cluster, group, 0)
            if group_coordinator != txn_coordinator:
                break
        other = ({1, 2, 3} - {txn_coordinator, group_coordinator}).pop()
        say(f"transaction coordinator of {TXN_ID}: node {txn_coordinator}; group coordinator of "
            f"{group}: node {group_coordinator}; third node {other}")  # fmt: skip
        code = txn_offset_commit(cluster.address(other), group, "in")
        say(f"raw TxnOffsetCommit(group {group}) to node {other}, not its coordinator "
            f"-> {ERRORS.get(code, code)}")  # fmt: skip
        leaders = {t: admin.list_topics(timeout=5).topics[t].partitions[0].leader
                   for t in ("in", "out")}  # fmt: skip
        say(f"partition leaders: {leaders}")

        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": TXN_ID,
                "transaction.timeout.ms": 10_000,
                "debug": "eos,broker,protocol,metadata",
            }
        )
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap, "group.id": group,
             "enable.auto.commit": False, "log_level": 3}
        )  # fmt: skip
        producer.init_transactions(30)
        say("init_transactions done")
        producer.begin_transaction()
        producer.produce("out", value=b"first")
        producer.send_offsets_to_transaction(
            [TopicPartition("in", 0, 1)], consumer.consumer_group_metadata(), 15
        )
        producer.commit_transaction(15)
        say("first transaction committed (group coordinator now cached by the producer)")
        probe = Probe(cluster, group)
        probe.start()
        if args.variant == "cold":  # between two transactions: one begun before would time out
            for node in (1, 2, 3):
                cluster.kill(node)
            time.sleep(1)
            cluster.start(1, 2, 3)
            wait_partitions_led(admin, ["in", "out"])
        producer.begin_transaction()
        producer.produce("out", value=b"second")
        left = producer.flush(30)
        say(f"second transaction begun, one record produced ({left} not acknowledged)")
        if args.variant == "cold":
            killed: list[int] = []
        else:
            cluster.kill(group_coordinator)
            killed = [group_coordinator]
            if args.variant in ("fenced", "decommissioned"):
                wait_unlisted(admin, group_coordinator)
            if args.variant == "decommissioned":
                brokers = sorted(producer.list_topics(timeout=10).brokers)
                say(f"producer.list_topics(): brokers {brokers}")
        thread, result = call_send_offsets(producer, consumer, 2, args.call_timeout)
        thread.join(args.wait)
        if thread.is_alive():
            say(f"HANG: still inside send_offsets_to_transaction after {args.wait:.0f} s "
                f"(timeout given: {args.call_timeout} s)")  # fmt: skip
            exit_code = 2
            if args.restart_after_hang and killed:
                cluster.start(*killed)
                thread.join(args.wait)
                if thread.is_alive():
                    say(f"HANG: still inside {args.wait:.0f} s after the restart")
                else:
                    exit_code = 3  # returned only after the restart
        if not thread.is_alive() and "success" in result.get("outcome", ""):
            try:
                producer.commit_transaction(15)
                say("second transaction committed")
            except KafkaException as exception:
                say(f"commit_transaction: {exception.args[0]}")
        probe.stopping.set()
    finally:
        cluster.stop()
    say(f"exit {exit_code}; logs in {out}")
    sys.stdout.flush()
    os._exit(exit_code)  # a producer stuck in librdkafka would block a normal exit


if __name__ == "__main__":
    main()
