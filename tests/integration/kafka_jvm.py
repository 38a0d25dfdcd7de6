"""Apache Kafka's own JVM clients and tools, run against Moldau as a Kafka user runs them.

`scripts/setup.sh` resolves them from Maven Central (`tests/java/pom.xml`, exact versions) into
`tests/java/lib/<version>/`. A test asks for a version with the `kafka_jvm` fixture (the 4.1 line)
or `KafkaJvm.of(version)`: without the jars it is skipped, and fails under CI=true, as the other
client tests do. `tool("kafka-topics", ...)` runs the class behind Kafka's shell script of that
name; `java(main_class, ...)` runs any class on the classpath, or a single-file Java source
(`tests/java/*.java`, compiled in memory by the `java` launcher). `shell()` starts a `ToolShell`,
one JVM that runs tool after tool (`tests/java/ToolShell.java`): a JVM start costs 1.5-3 s, a
command in a warm shell a fraction of that.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
KAFKA_4_1 = "4.1.1"
KAFKA_NEWEST = "4.4.0"

# Kafka's shell scripts and the classes they run (Kafka 4.1's bin/).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing(message: str) -> None:
    if _in_ci():
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class KafkaJvm:
    """One version of Kafka's JVM clients and tools, and the `java` that runs them."""

    version: str
    java_path: str
    lib_dir: Path
    log_config: Path = JAVA_DIR / "log4j2.properties"

    @classmethod
    def of(cls, version: str = KAFKA_4_1) -> KafkaJvm:
        java_path = shutil.which("java")
        if java_path is None:
            _missing("java is not installed (Debian package openjdk-17-jdk-headless)")
        lib_dir = JAVA_DIR / "lib" / version
        if not (lib_dir / f"kafka-clients-{version}.jar").is_file():
            _missing(f"Kafka {version}'s jars are not in {lib_dir}; run scripts/setup.sh")
        assert java_path is not None
        return cls(version=version, java_path=java_path, lib_dir=lib_dir)

    def command(self, main_class: str, arguments: Sequence[str] = ()) -> list[str]:
        """The command line that runs `main_class` (a class name, or a path to a single-file
        Java source) with `arguments`."""
        return [
            self.java_path,
            "-Xshare:auto",
            "-XX:TieredStopAtLevel=1",  # short-lived tools: start fast, little JIT
            "-Xmx512m",
            f"-Dlog4j2.configurationFile={self.log_config}",
            "-cp",
            f"{self.lib_dir}/*",
            main_class,
            *arguments,
        ]

    def tool(
        self,
        name: str,
        *arguments: str,
        timeout: float = 120.0,
        check: bool = True,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run Kafka's tool `name` (as its shell script would) to completion. With `check`, a
        non-zero exit fails the test with the tool's output."""
        return self.run(TOOLS[name], arguments, timeout=timeout, check=check, input_text=input_text)

    def run(
        self,
        main_class: str,
        arguments: Sequence[str] = (),
        *,
        timeout: float = 120.0,
        check: bool = True,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            self.command(main_class, arguments),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
        return _checked(completed, main_class, arguments, check=check)

    def shell(self) -> contextlib.closing[ToolShell]:
        """A JVM that runs Kafka's tools one after another, closed on leaving the `with`."""
        return contextlib.closing(ToolShell(self))

    def start(
        self, main_class: str, arguments: Sequence[str] = (), *, log_path: Path
    ) -> subprocess.Popen[str]:
        """Start `main_class` in the background: stdout piped (JSON lines, for the verifiable
        clients), stderr to `log_path`. The caller stops it, by PID."""
        with log_path.open("w") as log:
            return subprocess.Popen(
                self.command(main_class, arguments),
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
            )


def _checked(
    completed: subprocess.CompletedProcess[str],
    main_class: str,
    arguments: Sequence[str],
    *,
    check: bool,
) -> subprocess.CompletedProcess[str]:
    """`completed`; with `check`, a non-zero exit fails the test with the tool's output."""
    if check and completed.returncode != 0:
        pytest.fail(
            f"{main_class} {' '.join(arguments)} exited {completed.returncode}\n"
            f"stdout:\n{completed.stdout[-4000:]}\nstderr:\n{completed.stderr[-4000:]}"
        )
    return completed


class ToolShell:
    """Kafka's tools run in one JVM, one command at a time (`tests/java/ToolShell.java`), each
    with the arguments, output and exit code it has when run from its shell script;
    `close()` stops the JVM."""

    def __init__(self, jvm: KafkaJvm) -> None:
        # The JVM's own stderr (a failure to start), open as long as the shell is.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(
            jvm.command(str(JAVA_DIR / "ToolShell.java")),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self._lock = threading.Lock()
        if self._read_line(timeout=120.0) != "READY":
            self._fail("the tool shell did not start")

    def tool(
        self, name: str, *arguments: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run Kafka's tool `name` to completion, as `KafkaJvm.tool` does."""
        return self.run(TOOLS[name], *arguments, timeout=timeout, check=check)

    def run(
        self, main_class: str, *arguments: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run `main_class`'s main method with `arguments` to completion."""
        command = [main_class, *arguments]
        assert not any("\0" in word or "\n" in word for word in command), command
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write("\0".join(command).encode() + b"\n")
            self._process.stdin.flush()
            header = self._read_line(timeout=timeout).split()
            if len(header) != 4 or header[0] != "EXIT":
                self._fail(f"{main_class} {' '.join(arguments)}: no answer from the tool shell")
            code, out_size, err_size = (int(field) for field in header[1:])
            stdout = self._read(out_size).decode()
            stderr = self._read(err_size).decode()
        completed = subprocess.CompletedProcess(command, code, stdout, stderr)
        return _checked(completed, main_class, arguments, check=check)

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def _read_line(self, *, timeout: float) -> str:
        """One line of the shell's stdout; the JVM is killed if none comes within `timeout`."""
        assert self._process.stdout is not None
        timer = threading.Timer(timeout, self._process.kill)
        timer.start()
        try:
            return self._process.stdout.readline().decode().rstrip("\n")
        finally:
            timer.cancel()

    def _read(self, size: int) -> bytes:
        assert self._process.stdout is not None
        data = self._process.stdout.read(size)
        if len(data) != size:
            self._fail("the tool shell stopped in the middle of an answer")
        return data

    def _fail(self, message: str) -> None:
        self._process.kill()
        self._process.wait()
        self._log.seek(0)
        pytest.fail(f"{message}; its stderr:\n{self._log.read().decode()[-4000:]}")
