"""`moldau produce` / `moldau consume` against a real server, and interoperation with kcat.

Records written by the CLI are read back with kcat byte for byte (keys, values, headers), and
records written by kcat are read with the CLI. Keyed records land on the partition Kafka's murmur2
partitioner picks, whichever of the two tools wrote them.
"""

from __future__ import annotations

import base64
import re
import select
import signal
import socket
import subprocess

import pytest

from moldau.client.partitioner import partition_for_key

from .support import now_ms, unique_topic, wait_until
from .test_cli_support import moldau, moldau_process, run_tool

pytestmark = pytest.mark.timeout(120)


def test_cli_produces_and_kcat_consumes_the_same_bytes(server, kcat: str) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-to-kcat")
    moldau("topic", "create", topic, "-p", "3", bootstrap=b)
    lines = [b"user-%d:payload %d \xc3\xa9" % (i, i) for i in range(40)]
    result = moldau(
        "produce", topic, "-K", ":", "-H", "source=cli", "-H", "n=1",
        "-z", "gzip", "--format", "json",
        bootstrap=b, stdin=b"\n".join(lines) + b"\n",
    )  # fmt: skip
    summary = result.json()
    assert summary["records"] == 40
    assert sum(p["records"] for p in summary["partitions"]) == 40

    output = run_tool(
        [kcat, "-b", b, "-C", "-t", topic, "-e", "-q", "-f", "%p|%k|%s|%h\\n"]
    ).splitlines()
    seen = sorted(output)
    expected = sorted(
        b"%d|%s|%s|source=cli,n=1"
        % (partition_for_key(line.split(b":")[0], 3), *line.split(b":", 1))
        for line in lines
    )
    assert seen == expected


def test_kcat_produces_and_cli_consumes_with_formats_and_offsets(server, kcat: str) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("kcat-to-cli")
    moldau("topic", "create", topic, "-p", "1", bootstrap=b)
    before = now_ms()
    records = b"".join(b"k%d=v%d\n" % (i, i) for i in range(20))
    run_tool([kcat, "-b", b, "-P", "-t", topic, "-K", "=", "-H", "via=kcat"], stdin=records)

    consumed = moldau("consume", topic, "-e", bootstrap=b).json_lines()
    assert [(m["offset"], m["key"], m["value"]) for m in consumed] == [
        (i, f"k{i}", f"v{i}") for i in range(20)
    ]
    assert all(m["topic"] == topic and m["partition"] == 0 for m in consumed)
    assert all(m["headers"] == [["via", "kcat"]] for m in consumed)
    assert all(m["timestamp"] >= before - 1000 for m in consumed)

    tail = moldau("consume", topic, "-o", "-3", "-e", "-f", "%o %k=%s %K %S\\n", bootstrap=b)
    assert tail.text.splitlines() == ["17 k17=v17 3 3", "18 k18=v18 3 3", "19 k19=v19 3 3"]

    counted = moldau("consume", topic, "-o", "5", "-n", "2", "--format", "text", bootstrap=b)
    assert counted.text.splitlines() == ["v5", "v6"]

    at_time = moldau("consume", topic, "-o", f"@{consumed[12]['timestamp']}", "-e", bootstrap=b)
    assert at_time.json_lines()[0]["offset"] <= 12
    assert at_time.json_lines()[-1]["offset"] == 19
    after_all = moldau("consume", topic, "-o", f"@{now_ms() + 60_000}", "-e", bootstrap=b)
    assert after_all.stdout == b""


def test_keyed_records_from_kcat_land_where_the_cli_partitioner_says(server, kcat: str) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("murmur2")
    moldau("topic", "create", topic, "-p", "7", bootstrap=b)
    keys = [f"key-{i}" for i in range(60)]
    run_tool(
        [kcat, "-b", b, "-P", "-t", topic, "-K", ":", "-X", "partitioner=murmur2_random"],
        stdin="".join(f"{k}:v\n" for k in keys).encode(),
    )
    consumed = moldau("consume", topic, "-e", "-f", "%p %k\\n", bootstrap=b).text.splitlines()
    placed = {line.split()[1]: int(line.split()[0]) for line in consumed}
    assert placed == {k: partition_for_key(k.encode(), 7) for k in keys}


def test_explicit_partition_files_and_null_keys(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-files")
    moldau("topic", "create", topic, "-p", "2", bootstrap=b)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    moldau("produce", topic, str(blob), "-l", "-p", "1", bootstrap=b)
    moldau("produce", topic, "-p", "1", "-D", ";", bootstrap=b, stdin=b"a;b;c")
    consumed = moldau("consume", topic, "-p", "1", "-e", bootstrap=b).json_lines()
    assert consumed[0]["value"] == {"base64": base64.b64encode(bytes(range(256))).decode()}
    assert [m["value"] for m in consumed[1:]] == ["a", "b", "c"]
    assert all(m["key"] is None and m["partition"] == 1 for m in consumed)


def test_perf_produce_and_consume_print_kafkas_summary(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-perf")
    moldau("topic", "create", topic, "-p", "2", bootstrap=b)
    produced = moldau("perf", "produce", topic, "-n", "2000", "-s", "64", bootstrap=b)
    assert re.fullmatch(
        r"2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th.\n",
        produced.text,
    ), produced.text
    header, values = moldau("perf", "consume", topic, "-n", "2000", bootstrap=b).text.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    stats = dict(zip(header.split(", "), values.split(", "), strict=True))
    assert stats["data.consumed.in.nMsg"] == "2000"
    assert float(stats["data.consumed.in.MB"]) == round(2000 * 64 / 1024 / 1024, 4)


def test_produce_sends_each_line_before_stdin_closes(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("cli-live")
    moldau("topic", "create", topic, "-p", "1", bootstrap=b)
    producer = moldau_process(
        "produce", topic, bootstrap=b,
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert producer.stdin is not None
    try:
        producer.stdin.write(b"first line\n")
        producer.stdin.flush()

        def arrived() -> bool:
            text = moldau("consume", topic, "-e", "--format", "text", bootstrap=b).text
            return text == "first line\n"

        wait_until(arrived, timeout=30, message="a line was not sent while stdin stayed open")
        producer.stdin.write(b"second line\n")
    finally:
        producer.stdin.close()
        producer.wait(30)
    assert producer.returncode == 0, producer.stderr.read() if producer.stderr else ""
    final = moldau("consume", topic, "-e", "--format", "text", bootstrap=b).text
    assert final == "first line\nsecond line\n"


def test_isolation_levels_with_transactions_from_confluent(server) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer as ConfluentProducer

    b = server.bootstrap_servers
    topic = unique_topic("cli-txn")
    moldau("topic", "create", topic, "-p", "1", bootstrap=b)
    producer = ConfluentProducer({"bootstrap.servers": b, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted-1")
    producer.produce(topic, b"aborted-2")
    assert producer.flush(30) == 0  # on the broker, so that aborting leaves them in the log
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"open")
    assert producer.flush(30) == 0

    def read(level: str) -> list[str]:
        result = moldau(
            "consume", topic, "-e", "--isolation-level", level, "-f", "%s\\n", bootstrap=b
        )
        return result.text.splitlines()

    try:
        # An open transaction holds read_committed at the last stable offset, and -e still ends.
        assert read("read_committed") == ["committed"]
        assert read("read_uncommitted") == ["aborted-1", "aborted-2", "committed", "open"]
    finally:
        producer.abort_transaction(30)
    assert read("read_committed") == ["committed"]


def _line_within(stream, *, timeout_s: float) -> bytes:  # type: ignore[no-untyped-def]
    """The next line of a child's pipe, or b"" if none came within `timeout_s`."""
    ready, _, _ = select.select([stream], [], [], timeout_s)
    return stream.readline() if ready else b""


def test_produce_and_consume_keep_going_across_a_broker_restart(start_server) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server(listeners=f"PLAINTEXT://127.0.0.1:{port}")
    b = server.bootstrap_servers
    topic = unique_topic("cli-restart")
    moldau("topic", "create", topic, "-p", "1", bootstrap=b)
    producer = moldau_process(
        "produce", topic, bootstrap=b,
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    consumer = moldau_process(
        "consume", topic, "-f", "%s\\n", bootstrap=b, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert producer.stdin is not None and consumer.stdout is not None
    try:
        producer.stdin.write(b"before\n")
        producer.stdin.flush()
        assert consumer.stdout.readline() == b"before\n"
        server.stop()
        # One line says so, as kcat prints transport errors, and the consumer keeps trying.
        warning = _line_within(consumer.stderr, timeout_s=30)
        assert warning.startswith(b"warning: fetching failed: "), warning
        assert warning.endswith(b"; retrying\n"), warning
        server.start()
        assert server.bootstrap_servers == b
        producer.stdin.write(b"after\n")
        producer.stdin.flush()
        line = consumer.stdout.readline()
        assert line == b"after\n", consumer.stderr.read() if not line and consumer.stderr else line
        producer.stdin.close()
        assert producer.wait(30) == 0, producer.stderr.read() if producer.stderr else ""
    finally:
        if not producer.stdin.closed:
            producer.stdin.close()
        consumer.send_signal(signal.SIGINT)
        consumer.wait(20)
        producer.wait(30)
    assert consumer.returncode == 130, consumer.stderr.read() if consumer.stderr else ""


def test_produce_creates_a_missing_topic_when_the_cluster_allows_it(start_server) -> None:  # type: ignore[no-untyped-def]
    b = start_server().bootstrap_servers
    topic = unique_topic("auto-created")
    summary = moldau("produce", topic, "--format", "json", bootstrap=b, stdin=b"a\nb\n").json()
    assert summary["records"] == 2
    assert [m["value"] for m in moldau("consume", topic, "-e", bootstrap=b).json_lines()] == [
        "a",
        "b",
    ]
    described = moldau("topic", "describe", "--format", "json", bootstrap=b).json()
    [created] = [t for t in described if t["name"] == topic]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", created["topic_id"])  # as kafka-topics prints it
    text = moldau("topic", "describe", bootstrap=b).text
    assert f"Topic: {topic}\tTopicId: {created['topic_id']}\t" in text

    refused = start_server(auto_create_topics_enable="false").bootstrap_servers
    result = moldau("produce", topic, bootstrap=refused, stdin=b"a\n", expect=1)
    assert result.stderr == (
        f"error: topic '{topic}' does not exist and the cluster does not create topics on first "
        f"use (auto.create.topics.enable=false); create it with `moldau topic create {topic}`\n"
    )
