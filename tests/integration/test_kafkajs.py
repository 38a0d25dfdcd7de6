"""kafkajs (Node.js) against a real `moldau server`, through the scripts in js/.

kafkajs consumes only through consumer groups, so its consume tests also need the group APIs
(FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch). One test reads kafkajs's records
with librdkafka instead, so that producing is checked on its own.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from . import rdkafka
from .conftest import JS_DIR
from .support import (
    BIG_TOPIC_CONFIG,
    CLIENT_MAX_BYTES,
    CODECS,
    DEADLINE_S,
    PARTITIONS,
    Record,
    assert_same_records,
    check_acknowledged,
    count_by_partition,
    now_ms,
    placed,
    record_mix,
    unique_topic,
)

NODE_TIMEOUT_S = 90


def run_script(node: str, script: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(JS_DIR / script)],
        input=json.dumps(arguments).encode(),
        capture_output=True,
        timeout=NODE_TIMEOUT_S,
        cwd=JS_DIR,
        check=False,
    )
    stdout = result.stdout.decode(errors="replace").strip()
    assert result.returncode == 0, (
        f"node {script} exited {result.returncode}: {stdout[-2000:]}\n"
        f"stderr: {result.stderr.decode(errors='replace')[-3000:]}"
    )
    return json.loads(stdout.splitlines()[-1])


def encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def decode(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def kafkajs_records(*, seed: int, big: bool = True) -> list[Record]:
    # kafkajs takes headers as an object: one value list per name, no null values.
    return record_mix(seed=seed, big=big, duplicate_header_keys=False, null_header_values=False)


def create_topic(node: str, bootstrap: str, topic: str, *, partitions: int, configs=None) -> None:
    arguments = {"brokers": bootstrap, "action": "createTopic", "topic": topic}
    arguments |= {"partitions": partitions, "configs": configs or {}}
    assert run_script(node, "admin.js", arguments) == {"created": True}


def produce(
    node: str, bootstrap: str, topic: str, records: Sequence[Record], *, codec: str = "none"
) -> list[Record]:
    arguments = {
        "brokers": bootstrap,
        "topic": topic,
        "codec": codec,
        "maxBytes": CLIENT_MAX_BYTES,
        "records": [
            {
                "key": encode(r.key),
                "value": encode(r.value),
                "headers": [[name, encode(value)] for name, value in r.headers],
                "partition": r.partition,
                "timestamp": r.timestamp_ms,
            }
            for r in records
        ],
    }
    result = run_script(node, "produce.js", arguments)
    acknowledged = [
        placed(record, partition=where["partition"], offset=int(where["offset"]))
        for record, where in zip(records, result["placed"], strict=True)
    ]
    check_acknowledged(acknowledged)
    return acknowledged


def consume(
    node: str,
    bootstrap: str,
    topic: str,
    expected: dict[int, int],
    *,
    seek: dict[int, int] | None = None,
) -> list[Record]:
    arguments = {
        "brokers": bootstrap,
        "topic": topic,
        "groupId": f"kafkajs-{uuid.uuid4().hex[:8]}",
        "expected": {str(p): n for p, n in expected.items()},
        "seek": None if seek is None else {str(p): o for p, o in seek.items()},
        "timeoutMs": int(DEADLINE_S * 1000),
        "maxBytes": CLIENT_MAX_BYTES,
    }
    result = run_script(node, "consume.js", arguments)
    return [
        Record(
            key=decode(r["key"]),
            value=decode(r["value"]),
            headers=tuple((name, decode(value)) for name, value in r["headers"]),
            timestamp_ms=int(r["timestamp"]),
            partition=r["partition"],
            offset=int(r["offset"]),
        )
        for r in result["records"]
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_for_byte(server, node, codec):
    topic = unique_topic(f"kafkajs-{codec}")
    bootstrap = server.bootstrap_servers
    create_topic(node, bootstrap, topic, partitions=PARTITIONS, configs=BIG_TOPIC_CONFIG)
    sent = produce(
        node, bootstrap, topic, kafkajs_records(seed=70 + CODECS.index(codec)), codec=codec
    )

    consumed = consume(node, bootstrap, topic, count_by_partition(sent))

    assert_same_records(sent, consumed)


def test_records_from_kafkajs_read_back_by_librdkafka(server, node):
    topic = unique_topic("kafkajs-to-rdkafka")
    bootstrap = server.bootstrap_servers
    create_topic(node, bootstrap, topic, partitions=PARTITIONS, configs=BIG_TOPIC_CONFIG)
    sent = produce(node, bootstrap, topic, kafkajs_records(seed=80), codec="gzip")

    consumed = rdkafka.consume_all(bootstrap, topic, sent, partitions=PARTITIONS)

    assert_same_records(sent, consumed)


def test_consume_from_given_offsets_returns_the_rest_of_each_partition(server, node):
    topic = unique_topic("kafkajs-offsets")
    bootstrap = server.bootstrap_servers
    create_topic(node, bootstrap, topic, partitions=PARTITIONS)
    sent = produce(node, bootstrap, topic, kafkajs_records(seed=81, big=False))
    starts = {0: 3, 1: 1, 2: 4}
    expected = [r for r in sent if r.offset >= starts[r.partition]]

    consumed = consume(node, bootstrap, topic, count_by_partition(expected), seek=starts)

    assert_same_records(expected, consumed)


def test_offsets_by_timestamp_then_consume_from_there(server, node):
    topic = unique_topic("kafkajs-times")
    bootstrap = server.bootstrap_servers
    create_topic(node, bootstrap, topic, partitions=2)
    base = now_ms() - 600_000
    records = [
        Record(key=b"k", value=b"at %d" % i, timestamp_ms=base + 1000 * i, partition=1)
        for i in range(6)
    ]
    sent = produce(node, bootstrap, topic, records)
    assert [r.offset for r in sent] == list(range(6))

    def offsets_at(timestamp: int) -> dict[int, str]:
        arguments = {"brokers": bootstrap, "action": "offsetsByTimestamp", "topic": topic}
        result = run_script(node, "admin.js", arguments | {"timestamp": timestamp})
        return {o["partition"]: o["offset"] for o in result["offsets"]}

    # kafkajs answers with the end offset (the high watermark) where no record is that late.
    assert offsets_at(base + 2500) == {0: "0", 1: "3"}
    assert offsets_at(base + 2000) == {0: "0", 1: "2"}
    assert offsets_at(base + 5001) == {0: "0", 1: "6"}
    topic_offsets = run_script(
        node, "admin.js", {"brokers": bootstrap, "action": "topicOffsets", "topic": topic}
    )["offsets"]
    assert sorted((o["partition"], o["low"], o["high"]) for o in topic_offsets) == [
        (0, "0", "0"),
        (1, "0", "6"),
    ]

    consumed = consume(node, bootstrap, topic, {1: 3}, seek={1: 3})
    assert_same_records(sent[3:], consumed)
