"""kcat (librdkafka's command-line client) against a real `moldau server`.

kcat produces from files (one message per file, any bytes) and from delimited lines, and consumes
with a format that announces key and value lengths, so every byte can be compared. kcat does not
report offsets when producing: a single kcat run writing to an explicit partition of a new topic
must get offsets 0, 1, 2, ... in input order.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import rdkafka
from .support import BIG_RECORD_BYTES, BIG_TOPIC_CONFIG, CLIENT_MAX_BYTES, CODECS, now_ms
from .support import unique_topic as topic_name

KCAT_TIMEOUT_S = 60
SIZE_LIMITS = [
    "-X",
    f"message.max.bytes={CLIENT_MAX_BYTES}",
]
CONSUMER_LIMITS = [
    "-X",
    f"fetch.message.max.bytes={CLIENT_MAX_BYTES}",
    "-X",
    f"fetch.max.bytes={CLIENT_MAX_BYTES}",
    "-X",
    f"receive.message.max.bytes={2 * CLIENT_MAX_BYTES}",
]
# Header line, then exactly %K key bytes and %S value bytes (-1: null), then a newline.
FORMAT = "%p %o %T %K %S %h\n%k%s\n"


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: str


def run_kcat(kcat: str, arguments: Sequence[str], *, stdin: bytes = b"") -> bytes:
    result = subprocess.run(
        [kcat, *arguments],
        input=stdin,
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"kcat {' '.join(arguments)} exited {result.returncode}\n"
        f"stderr: {result.stderr.decode(errors='replace')[-3000:]}"
    )
    return result.stdout


def produce_files(
    kcat: str,
    bootstrap: str,
    topic: str,
    files: Sequence[Path],
    *,
    partition: int,
    codec: str,
    key: bytes | None = None,
    headers: Sequence[str] = (),
) -> None:
    arguments = ["-P", "-b", bootstrap, "-t", topic, "-p", str(partition)]
    arguments += ["-X", f"compression.codec={codec}", *SIZE_LIMITS]
    if key is not None:
        arguments += ["-k", key.decode()]
    for header in headers:
        arguments += ["-H", header]
    run_kcat(kcat, [*arguments, *map(str, files)])


def produce_lines(
    kcat: str,
    bootstrap: str,
    topic: str,
    lines: Sequence[bytes],
    *,
    partition: int | None,
    codec: str,
) -> None:
    """One message per line, `key<TAB>value`; with -Z an empty key or value is sent as null."""
    arguments = ["-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-Z"]
    arguments += ["-X", f"compression.codec={codec}"]
    if partition is not None:
        arguments += ["-p", str(partition)]
    run_kcat(kcat, arguments, stdin=b"".join(line + b"\n" for line in lines))


def consume(kcat: str, bootstrap: str, topic: str, *extra: str) -> list[Consumed]:
    """Consume to the end of every partition (-e) and parse FORMAT's output."""
    output = run_kcat(
        kcat,
        ["-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", FORMAT, *CONSUMER_LIMITS, *extra],
    )
    records = []
    position = 0
    while position < len(output):
        end = output.index(b"\n", position)
        fields = output[position:end].decode().split(" ", 5)
        partition, offset, timestamp, key_length, value_length = map(int, fields[:5])
        position = end + 1
        key = None
        if key_length >= 0:
            key = output[position : position + key_length]
            position += key_length
        value = None
        if value_length >= 0:
            value = output[position : position + value_length]
            position += value_length
        assert output[position : position + 1] == b"\n", f"bad kcat output at byte {position}"
        position += 1
        records.append(Consumed(partition, offset, timestamp, key, value, fields[5]))
    return records


def by_partition(records: Sequence[Consumed]) -> dict[int, list[Consumed]]:
    grouped: dict[int, list[Consumed]] = {}
    for record in records:
        grouped.setdefault(record.partition, []).append(record)
    return grouped


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_for_byte(server, kcat, tmp_path, codec):
    topic = topic_name(f"kcat-{codec}")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=3, config=BIG_TOPIC_CONFIG)
    rng = random.Random(60 + CODECS.index(codec))
    started_ms = now_ms()

    # Partition 0: text lines with keys, a null key, a tombstone (null value).
    lines = [b"alpha\tfirst value", b"\tvalue without key", b"tombstone\t", b"beta\tlast"]
    produce_lines(kcat, server.bootstrap_servers, topic, lines, partition=0, codec=codec)
    # Partition 1: arbitrary bytes from files, a fixed key and headers, one ~1 MiB record.
    blobs = [rng.randbytes(n) for n in (1, 1000, 10_000)] + [rng.randbytes(BIG_RECORD_BYTES)]
    blobs.append(b"line one\nline two\n\x00\t\r\n")
    files = []
    for index, blob in enumerate(blobs):
        files.append(tmp_path / f"blob-{index}")
        files[-1].write_bytes(blob)
    produce_files(
        kcat,
        server.bootstrap_servers,
        topic,
        files,
        partition=1,
        codec=codec,
        key=b"blob-key",
        headers=["origin=kcat", "codec=" + codec],
    )
    # Partition 2: binary without key or headers.
    produce_files(kcat, server.bootstrap_servers, topic, files[:2], partition=2, codec=codec)
    # Left to librdkafka's default partitioner (consistent_random: hash of the key).
    spread = [b"spread-%d\tvalue %d" % (i % 5, i) for i in range(15)]
    produce_lines(kcat, server.bootstrap_servers, topic, spread, partition=None, codec=codec)
    finished_ms = now_ms()

    # kcat's librdkafka defaults to read_committed, like every librdkafka consumer.
    records = by_partition(consume(kcat, server.bootstrap_servers, topic))

    explicit = {
        0: [(b"alpha", b"first value", ""), (None, b"value without key", ""),
            (b"tombstone", None, ""), (b"beta", b"last", "")],
        1: [(b"blob-key", blob, f"origin=kcat,codec={codec}") for blob in blobs],
        2: [(None, blob, "") for blob in blobs[:2]],
    }  # fmt: skip
    spread_seen: list[tuple[int, bytes | None, bytes | None]] = []
    for partition, wanted in explicit.items():
        got = records.get(partition, [])
        assert [r.offset for r in got] == list(range(len(got))), f"partition {partition} offsets"
        head = [(r.key, r.value, r.headers) for r in got[: len(wanted)]]
        for index, (want, have) in enumerate(zip(wanted, head, strict=False)):
            assert have == want, f"partition {partition} offset {index} differs"
        assert len(head) == len(wanted), f"partition {partition}: {len(head)} of {len(wanted)}"
        spread_seen += [(partition, r.key, r.value) for r in got[len(wanted) :]]
        for record in got:
            assert started_ms - 1000 <= record.timestamp_ms <= finished_ms + 1000
    assert sorted(records) == [0, 1, 2]

    # Every spread record arrived once; equal keys share a partition and keep their send order.
    sent_spread = [tuple(line.split(b"\t")) for line in spread]
    assert sorted((k, v) for _, k, v in spread_seen) == sorted(sent_spread)
    partition_of_key: dict[bytes | None, int] = {}
    for partition, key, _ in spread_seen:
        assert partition_of_key.setdefault(key, partition) == partition, f"key {key!r} split"
    for key in partition_of_key:
        sent_values = [v for k, v in sent_spread if k == key]
        assert [v for _, k, v in spread_seen if k == key] == sent_values


def test_consume_from_offset_and_from_timestamp(server, kcat):
    topic = topic_name("kcat-start")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    first = [b"k\tearly %d" % i for i in range(5)]
    produce_lines(kcat, server.bootstrap_servers, topic, first, partition=0, codec="none")
    boundary_ms = now_ms()
    while now_ms() <= boundary_ms:  # later records get strictly later timestamps
        pass
    second = [b"k\tlate %d" % i for i in range(3)]
    produce_lines(kcat, server.bootstrap_servers, topic, second, partition=0, codec="none")

    from_offset = consume(kcat, server.bootstrap_servers, topic, "-p", "0", "-o", "3")
    assert [(r.offset, r.value) for r in from_offset] == [
        (3, b"early 3"), (4, b"early 4"), (5, b"late 0"), (6, b"late 1"), (7, b"late 2")
    ]  # fmt: skip

    from_time = consume(
        kcat, server.bootstrap_servers, topic, "-p", "0", "-o", f"s@{boundary_ms + 1}"
    )
    assert [(r.offset, r.value) for r in from_time] == [
        (5, b"late 0"), (6, b"late 1"), (7, b"late 2")
    ]  # fmt: skip

    query = run_kcat(
        kcat, ["-Q", "-b", server.bootstrap_servers, "-t", f"{topic}:0:{boundary_ms + 1}"]
    )
    assert f"{topic} [0] offset 5" in query.decode(), query.decode()


def test_metadata_lists_the_broker_and_every_partition(server, kcat):
    topic = topic_name("kcat-metadata")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=4)

    listing = json.loads(run_kcat(kcat, ["-L", "-J", "-b", server.bootstrap_servers, "-t", topic]))

    [broker] = listing["brokers"]
    # The advertised address: what the client connects to (kcat may append "/<id>").
    assert broker["name"].split("/")[0] == server.bootstrap_servers
    [described] = listing["topics"]
    assert described["topic"] == topic
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3]
    for partition in described["partitions"]:
        assert partition["leader"] == broker["id"]
        assert [r["id"] for r in partition["replicas"]] == [broker["id"]]
        assert [r["id"] for r in partition["isrs"]] == [broker["id"]]
