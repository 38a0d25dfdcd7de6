"""Kafka Connect (Apache Kafka 4.1) workers against Moldau, run as a Connect user runs them:
`ConnectDistributed` with a worker properties file, its REST API on a free 127.0.0.1 port.

`scripts/setup.sh` resolves the worker's classpath and the connectors from Maven Central
(`tests/java/connect/pom.xml`) into `tests/java/lib/connect/`: `worker/`, and one directory per
connector under `plugins/` (the worker's `plugin.path`, so each connector has its own class
loader). Without them a test is skipped, and fails under CI=true. Connectors are created and
watched through the REST API, as an operator does; a worker is stopped by PID, SIGTERM and a
clean exit, or SIGKILLed.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .cluster import LOOPBACK, free_port
from .kafka_jvm import JAVA_DIR, KafkaJvm, _missing
from .support import wait_until

CONNECT_LIB = JAVA_DIR / "lib" / "connect"
PLUGIN_PATH = CONNECT_LIB / "plugins"
DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
DEBEZIUM_POSTGRES = "io.debezium.connector.postgresql.PostgresConnector"
STOP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0


def connect_runtime(kafka_jvm: KafkaJvm) -> KafkaJvm:
    """The worker's classpath for `kafka_jvm`'s Kafka version, with its connectors beside it."""
    runtime = dataclasses.replace(
        kafka_jvm,
        lib_dir=CONNECT_LIB / "worker",
        log_config=JAVA_DIR / "connect" / "log4j2.properties",
    )
    wanted = [
        runtime.lib_dir / f"connect-runtime-{kafka_jvm.version}.jar",
        PLUGIN_PATH / "file" / f"connect-file-{kafka_jvm.version}.jar",
        PLUGIN_PATH / "debezium-postgres",
    ]
    for path in wanted:
        if not path.exists():
            _missing(f"Kafka Connect is not resolved ({path} is missing); run scripts/setup.sh")
    return runtime


class RestError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """What the workers of one group share: the cluster, the group (its config, offset and
    status topics are named after it), their replication factor, and more worker properties."""

    bootstrap: str
    group_id: str
    replication_factor: int
    settings: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def properties(self, rest_port: int) -> dict[str, str]:
        """The properties file of the group's worker whose REST API listens on `rest_port`."""
        group, factor = self.group_id, str(self.replication_factor)
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": factor,
            "offset.storage.replication.factor": factor,
            "status.storage.replication.factor": factor,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "listeners": f"http://{LOOPBACK}:{rest_port}",
            "rest.advertised.host.name": LOOPBACK,
            "rest.advertised.port": str(rest_port),
            "plugin.path": str(PLUGIN_PATH),
            "offset.flush.interval.ms": "1000",
            "plugin.discovery": "service_load",  # every plugin here has manifests: no scan
            **self.settings,
        }


class ConnectWorker:
    """One `ConnectDistributed` process; its properties file and log live in `directory`."""

    def __init__(self, runtime: KafkaJvm, *, directory: Path, config: WorkerConfig) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.runtime = runtime
        self.port = free_port()
        self.log_path = directory / "worker.log"
        self.properties_path = directory / "worker.properties"
        self.properties_path.write_text(
            "".join(f"{key}={value}\n" for key, value in config.properties(self.port).items())
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def worker_id(self) -> str:
        """How the REST API names this worker in a connector's status."""
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> ConnectWorker:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.runtime.command(DISTRIBUTED, [str(self.properties_path)]),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self

    def wait_ready(self, timeout: float = 120.0) -> ConnectWorker:
        """Until the worker has joined its group and read its config topic: its connector list
        answers (before, the REST API answers a rebalance in progress)."""

        def answers() -> bool:
            self._require_running()
            try:
                self.request("GET", "/connectors")
            except (RestError, OSError):
                return False
            return True

        wait_until(answers, timeout=timeout, message=f"the Connect worker on port {self.port}")
        return self

    def _require_running(self) -> None:
        assert self.process is not None and self.process.poll() is None, (
            f"the Connect worker exited: {self.log_tail()}"
        )

    def log_tail(self, characters: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:]

    def request(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise RestError(error.code, error.read().decode(errors="replace")) from None
        return json.loads(payload) if payload else None

    def accepted(self, method: str, path: str, body: object = None) -> Any:
        """A request the worker may only take once its group is stable: asked again while the
        group rebalances (409) or the leader it forwards to is not there yet (500, 503)."""
        answer: list[Any] = []

        def taken() -> bool:
            self._require_running()
            try:
                answer.append(self.request(method, path, body))
            except RestError as error:
                if error.status in (409, 500, 503):
                    return False
                raise
            return True

        wait_until(taken, timeout=120, message=f"{method} {path} accepted")
        return answer[0]

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        """Create (or update) connector `name`."""
        self.accepted("PUT", f"/connectors/{name}/config", {"name": name, **config})

    def wait_stopped(self, name: str, timeout: float = 60.0) -> None:
        """After PUT /connectors/`name`/stop: the connector STOPPED, its tasks gone (KIP-875)."""

        def stopped() -> bool:
            status = self.status(name)
            return status is not None and status["connector"]["state"] == "STOPPED"

        wait_until(stopped, timeout=timeout, message=f"{name} stopped")

    def status(self, name: str) -> dict[str, Any] | None:
        try:
            status: dict[str, Any] = self.request("GET", f"/connectors/{name}/status")
        except (RestError, OSError):
            return None
        return status

    def wait_running(
        self, name: str, tasks: int = 1, *, on: str | None = None, timeout: float = 120.0
    ) -> dict[str, Any]:
        """The connector and its `tasks` tasks RUNNING (with `on`, the tasks on that worker); a
        FAILED one fails the test with its trace."""

        def running() -> dict[str, Any] | None:
            self._require_running()
            status = self.status(name)
            if status is None:
                return None
            states = [status["connector"], *status["tasks"]]
            failed = [state for state in states if state["state"] == "FAILED"]
            assert not failed, f"{name} failed: {failed[0].get('trace', '')[:4000]}"
            if len(status["tasks"]) != tasks or any(s["state"] != "RUNNING" for s in states):
                return None
            if on is not None and any(task["worker_id"] != on for task in status["tasks"]):
                return None
            return status

        found = wait_until(running, timeout=timeout, message=f"{name} running")
        assert isinstance(found, dict)
        return found

    def kill(self) -> None:
        """SIGKILL: no rebalance on the way out, no offsets flushed, no transaction ended."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def stop(self) -> None:
        """SIGTERM (the worker leaves its group and stops its tasks), then an exit within
        STOP_TIMEOUT_S (a JVM ended by SIGTERM exits 143)."""
        process = self.process
        if process is None:
            return
        self.process = None
        if process.poll() is not None:
            raise AssertionError(f"the Connect worker died during the test: {self.log_tail()}")
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(
                f"the Connect worker did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM"
            ) from None
        assert code in (0, 128 + signal.SIGTERM), f"worker exited {code}: {self.log_tail()}"


class WorkerGroup:
    """Connect workers of one group, started together; a context manager that stops, by PID,
    every worker still running when it exits."""

    def __init__(self, runtime: KafkaJvm, *, directory: Path, config: WorkerConfig) -> None:
        self.runtime = runtime
        self.directory = directory
        self.config = config
        self.workers: list[ConnectWorker] = []

    def start(self, count: int) -> list[ConnectWorker]:
        """`count` more workers, started at once and each ready (in the group, REST up)."""
        started = [
            ConnectWorker(
                self.runtime,
                directory=self.directory / f"connect-worker-{len(self.workers) + index}",
                config=self.config,
            ).start()
            for index in range(count)
        ]
        self.workers.extend(started)
        for worker in started:
            worker.wait_ready()
        return started

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        problems = []
        for worker in self.workers:
            try:
                worker.stop()
            except AssertionError as error:
                problems.append(error)
        if problems:
            raise problems[0]
