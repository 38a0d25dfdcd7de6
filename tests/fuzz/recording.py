"""Record the request frames real clients send, as seeds for the fuzzers:

    python -m tests.fuzz.recording [--out tests/fuzz/corpus/requests]

An embedded node advertises a recording proxy as its address, so every connection of
confluent-kafka (librdkafka), kafka-python and aiokafka goes through the proxy, which keeps up to
`PER_KEY` distinct frames per (client, API, version) as `<client>-<api>-v<version>-<sha1>` files
(the whole frame, size prefix included). The workload touches what clients do: admin calls,
idempotent and transactional produce with every codec, group consumption and commits.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import moldau

PER_KEY = 3
CORPUS = Path(__file__).parent / "corpus" / "requests"


class RecordingProxy:
    """Forwards loopback connections to `upstream`, keeping the client's frames by API."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = ("127.0.0.1", 0)
        self.client = "unknown"
        self.frames: dict[tuple[str, int, int], dict[str, bytes]] = collections.defaultdict(dict)
        self._stopped = False

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
                if requests:
                    pending = self._keep_frames(pending + data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _keep_frames(self, pending: bytes) -> bytes:
        while len(pending) >= 4:
            (size,) = struct.unpack_from(">i", pending)
            if len(pending) < 4 + size:
                break
            frame, pending = pending[: 4 + size], pending[4 + size :]
            api_key, version = struct.unpack_from(">hh", frame, 4)
            kept = self.frames[(self.client, api_key, version)]
            if len(kept) < PER_KEY and size <= 16384:
                kept.setdefault(hashlib.sha1(frame).hexdigest()[:12], frame)
        return pending


def _confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic("rec-c", 2, 1, config={"cleanup.policy": "compact,delete"})]
    ).values():
        future.result(30)
    resource = ConfigResource("topic", "rec-c")
    for future in admin.describe_configs([resource]).values():
        future.result(30)
    resource.add_incremental_config(
        ConfigEntry("retention.ms", "100000", incremental_operation=AlterConfigOpType.SET)
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    for future in admin.create_partitions([NewPartitions("rec-c", 3)]).values():
        future.result(30)
    admin.describe_cluster().result(30)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True}
        )
        for index in range(20):
            producer.produce("rec-c", key=b"k%d" % index, value=b"v" * index, headers={"h": b"1"})
        assert producer.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rec-txn"})
    transactional.init_transactions(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rec-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["rec-c"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    for commit in (True, False):
        transactional.begin_transaction()
        transactional.produce("rec-c", key=b"t", value=b"in a transaction", partition=0)
        transactional.send_offsets_to_transaction(
            [TopicPartition("rec-c", 0, 1)], consumer.consumer_group_metadata(), 30
        )
        if commit:
            transactional.commit_transaction(30)
        else:
            transactional.abort_transaction(30)
    consumer.offsets_for_times([TopicPartition("rec-c", 0, 0)], 10)
    consumer.get_watermark_offsets(TopicPartition("rec-c", 0), 10)
    consumer.close()
    admin.list_consumer_groups().result(30)
    for future in admin.describe_consumer_groups(["rec-group"]).values():
        future.result(30)
    for future in admin.delete_records([TopicPartition("rec-c", 0, 1)]).values():
        future.result(30)
    for future in admin.delete_topics(["rec-c"]).values():
        future.result(30)


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("rec-k", 2, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "rec-k")])
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all")
    for index in range(20):
        producer.send("rec-k", key=b"k%d" % index, value=b"v" * index)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        "rec-k",
        bootstrap_servers=bootstrap,
        group_id="rec-k-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    for index, _message in enumerate(consumer):
        if index == 19:
            break
    consumer.commit()
    consumer.close()
    from kafka.structs import TopicPartition

    partition = TopicPartition("rec-k", 0)
    for call in (
        lambda: admin.list_groups(),
        lambda: admin.describe_groups(["rec-k-group"]),
        lambda: admin.list_group_offsets("rec-k-group"),
        lambda: admin.describe_cluster(),
        lambda: admin.describe_topics(["rec-k"]),
        lambda: admin.describe_log_dirs(),
        lambda: admin.describe_metadata_quorum(),
        lambda: admin.describe_producers([partition]),
        lambda: admin.describe_topic_partitions(["rec-k"]),
        lambda: admin.list_transactions(),
        lambda: admin.describe_transactions(["rec-txn"]),
        lambda: admin.list_partition_reassignments(),
        lambda: admin.describe_user_scram_credentials(),
        lambda: admin.elect_leaders(0, [partition]),
        lambda: admin.delete_records({partition: 1}),
        lambda: admin.delete_group_offsets("rec-k-group", [partition]),
        lambda: admin.delete_groups(["rec-k-group"]),
        lambda: admin.delete_topics(["rec-k"]),
    ):
        _attempt(call)
    admin.close()


def _attempt(call: Callable[[], object]) -> None:
    """Make a call for the frames it sends; its answer or failure does not matter here."""
    try:
        call()
    except Exception as error:
        print(f"(recording: {type(error).__name__}: {error})")


def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
        await producer.start()
        for index in range(20):
            await producer.send_and_wait("rec-a", key=b"k%d" % index, value=b"v" * index)
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "rec-a", bootstrap_servers=bootstrap, group_id="rec-a-group",
            auto_offset_reset="earliest",
        )  # fmt: skip
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=5000)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(main())


@contextlib.contextmanager
def _recording_node(proxy: RecordingProxy) -> Iterator[None]:
    with (
        tempfile.TemporaryDirectory() as data,
        moldau.Server(
            log_dirs=data,
            config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"},
        ) as server,
    ):
        proxy.upstream = ("127.0.0.1", server.node.listeners[0].bound_port)
        proxy.start()
        try:
            yield
        finally:
            proxy.stop()


def record(out: Path) -> int:
    proxy = RecordingProxy()
    bootstrap = f"127.0.0.1:{proxy.port}"
    with _recording_node(proxy):
        for name, workload in (
            ("confluent", _confluent),
            ("kafka-python", _kafka_python),
            ("aiokafka", _aiokafka),
        ):
            proxy.client = name
            workload(bootstrap)
            time.sleep(1)  # let the last frames through the proxy
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for (client, api_key, version), frames in sorted(proxy.frames.items()):
        for digest, frame in frames.items():
            (out / f"{client}-{api_key:02d}-v{version}-{digest}").write_bytes(frame)
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CORPUS)
    arguments = parser.parse_args()
    print(f"{record(arguments.out)} frames written to {arguments.out}")


if __name__ == "__main__":
    main()
