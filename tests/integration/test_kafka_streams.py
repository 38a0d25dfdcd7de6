"""Kafka Streams (Apache Kafka 4.1) on Moldau, exactly-once (`exactly_once_v2`): a word count
(re-keyed through a repartition topic, counts in a changelog) and a count per key and 10-second
window of event time, from `tests/java/StreamsApp.java`.

The application runs without a record cache, so each input record updates its count exactly
once: read with read_committed, the output of a key must be 1, 2, 3, ... n with nothing skipped
or repeated. On three nodes (replication factor 3), one node is SIGKILLed while the input is
still being processed."""

from __future__ import annotations

import itertools
import random
import subprocess
import threading
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, build_cluster
from .kafka_jvm import JAVA_DIR, KafkaJvm
from .support import now_ms, unique_topic, wait_until

WORDS = ["moldau", "kafka", "stream", "log", "raft", "broker", "topic", "offset"]
WINDOW_MS = 10_000


class StreamsApp:
    """One instance of `tests/java/StreamsApp.java`, stopped by SIGTERM (by PID)."""

    def __init__(
        self,
        kafka_jvm: KafkaJvm,
        *,
        topology: str,
        bootstrap: str,
        source: str,
        sink: str,
        directory: Path,
        replication_factor: int,
    ) -> None:
        self.running = threading.Event()
        self.lines: list[str] = []
        self.log_path = directory / f"{topology}.log"
        self.process = kafka_jvm.start(
            str(JAVA_DIR / "StreamsApp.java"),
            [
                topology,
                bootstrap,
                source,
                sink,
                f"{sink}-app",
                str(directory / f"{topology}-state"),
                str(replication_factor),
            ],
            log_path=self.log_path,
        )
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            if line.strip() == "RUNNING":
                self.running.set()

    def wait_running(self) -> None:
        wait_until(
            lambda: self.running.is_set() or self.process.poll() is not None,
            timeout=90,
            message="the Streams application running",
        )
        assert self.running.is_set(), f"Streams exited: {self.log_path.read_text()[-3000:]}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("Streams did not stop within 40 s of SIGTERM") from None
        self._reader.join(5)


def _create_topics(bootstrap: str, names: list[str], replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replicas > 1 else {}
    futures = admin.create_topics([NewTopic(name, 3, replicas, config=config) for name in names])
    for future in futures.values():
        future.result(30)


def _word_lines(count: int, seed: int) -> list[str]:
    chooser = random.Random(seed)
    return [" ".join(chooser.choices(WORDS, k=chooser.randint(1, 6))) for _ in range(count)]


def _windowed_events(count: int, seed: int) -> list[tuple[str, int]]:
    """(key, event time): ten keys over the six windows that ended two minutes ago, in time
    order (recent: Kafka refuses timestamps an hour ahead, and retention deletes old ones)."""
    chooser = random.Random(seed)
    start = now_ms() - 120_000
    start -= start % WINDOW_MS
    return [
        (f"k{chooser.randrange(10)}", start + index * (6 * WINDOW_MS) // count)
        for index in range(count)
    ]


def _send(bootstrap: str, topic: str, records: list[tuple[str | None, str, int | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for key, value, timestamp in records:
        options = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value=value, key=key, on_delivery=delivered, **options)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def _outputs(bootstrap: str, topic: str, expected_updates: int) -> dict[str, list[str]]:
    """Every update of the output, read_committed, per key in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    updates: dict[str, list[str]] = defaultdict(list)
    seen = itertools.count()
    total = 0
    try:
        consumer.assign([TopicPartition(topic, index, 0) for index in range(3)])

        def read() -> bool:
            nonlocal total
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                updates[message.key().decode()].append(message.value().decode())
                total = next(seen) + 1
            return total >= expected_updates

        wait_until(read, timeout=120, message=f"{expected_updates} output updates")
        for message in consumer.consume(1000, timeout=2):  # and nothing more
            updates[message.key().decode()].append(message.value().decode())
    finally:
        consumer.close()
    return dict(updates)


def _exact(updates: dict[str, list[str]], counts: Counter[str]) -> None:
    assert set(updates) == set(counts)
    for key, count in counts.items():
        assert updates[key] == [str(n) for n in range(1, count + 1)], key


def _word_counts(lines: list[str]) -> Counter[str]:
    return Counter(word for line in lines for word in line.split())


def _window_counts(events: list[tuple[str, int]]) -> Counter[str]:
    return Counter(f"{key}@{time - time % WINDOW_MS}" for key, time in events)


def test_streams_word_count_and_windows_exactly_once_on_one_node(
    server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    bootstrap = server.bootstrap_servers
    lines, events = _word_lines(600, seed=1), _windowed_events(600, seed=2)
    words_in, counts_out = unique_topic("streams-lines"), unique_topic("streams-counts")
    events_in, windows_out = unique_topic("streams-events"), unique_topic("streams-windows")
    _create_topics(bootstrap, [words_in, counts_out, events_in, windows_out], replicas=1)
    _send(bootstrap, words_in, [(None, line, None) for line in lines])
    _send(bootstrap, events_in, [(key, "e", time) for key, time in events])
    apps = [
        StreamsApp(
            kafka_jvm,
            topology=topology,
            bootstrap=bootstrap,
            source=source,
            sink=sink,
            directory=tmp_path,
            replication_factor=1,
        )
        for topology, source, sink in (
            ("word-count", words_in, counts_out),
            ("windowed", events_in, windows_out),
        )
    ]
    try:
        word_counts, window_counts = _word_counts(lines), _window_counts(events)
        _exact(_outputs(bootstrap, counts_out, sum(word_counts.values())), word_counts)
        _exact(_outputs(bootstrap, windows_out, len(events)), window_counts)
    finally:
        for app in apps:
            app.stop()


def test_streams_exactly_once_while_a_node_is_killed(
    start_server, tmp_path: Path, kafka_jvm: KafkaJvm
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3)
    bootstrap = cluster.bootstrap
    lines, events = _word_lines(1200, seed=3), _windowed_events(1200, seed=4)
    words_in, counts_out = unique_topic("streams-lines"), unique_topic("streams-counts")
    events_in, windows_out = unique_topic("streams-events"), unique_topic("streams-windows")
    _create_topics(bootstrap, [words_in, counts_out, events_in, windows_out], replicas=3)
    apps = [
        StreamsApp(
            kafka_jvm,
            topology=topology,
            bootstrap=bootstrap,
            source=source,
            sink=sink,
            directory=tmp_path,
            replication_factor=3,
        )
        for topology, source, sink in (
            ("word-count", words_in, counts_out),
            ("windowed", events_in, windows_out),
        )
    ]
    try:
        for app in apps:
            app.wait_running()
        half = len(lines) // 2
        _send(bootstrap, words_in, [(None, line, None) for line in lines[:half]])
        _send(bootstrap, events_in, [(key, "e", time) for key, time in events[:half]])
        first_half = _word_counts(lines[:half])
        _outputs(bootstrap, counts_out, sum(first_half.values()) // 2)  # under way
        cluster.kill(2)
        survivors = cluster.bootstrap_without(2)
        _send(survivors, words_in, [(None, line, None) for line in lines[half:]])
        _send(survivors, events_in, [(key, "e", time) for key, time in events[half:]])
        word_counts, window_counts = _word_counts(lines), _window_counts(events)
        _exact(_outputs(survivors, counts_out, sum(word_counts.values())), word_counts)
        _exact(_outputs(survivors, windows_out, len(events)), window_counts)
    finally:
        for app in apps:
            app.stop()
