"""Apache Kafka's own JVM clients and tools, run against Moldau as a Kafka user runs them.

`scripts/setup.sh` resolves them from Maven Central (`tests/java/pom.xml`, exact versions) into
`tests/java/lib/<version>/`. A test asks for a version with the `kafka_jvm` fixture (the 4.1 line)
or `KafkaJvm.of(version)`: without the jars it is skipped, and fails under CI=true, as the other
client tests do. `tool("kafka-topics", ...)` runs the class behind Kafka's shell script of that
name; `java(main_class, ...)` runs any class on the classpath, or a single-file Java source
(`tests/java/*.java`, compiled in memory by the `java` launcher).
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
        if check and completed.returncode != 0:
            pytest.fail(
                f"{main_class} {' '.join(arguments)} exited {completed.returncode}\n"
                f"stdout:\n{completed.stdout[-4000:]}\nstderr:\n{completed.stderr[-4000:]}"
            )
        return completed

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
