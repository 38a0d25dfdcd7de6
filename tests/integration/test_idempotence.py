"""Idempotent producers: retries after lost responses write nothing twice and keep the order
(confluent-kafka through a proxy that drops Produce responses), the producer state that
detects duplicates survives a restart of the server, and idle producer ids expire
(`producer.id.expiration.ms`)."""

from __future__ import annotations

import random
import socket
import struct
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Producer

from moldau.protocol.records import NewRecord, build_batch

from .rdkafka import consume, create_topic
from .support import DEADLINE_S, now_ms, unique_topic, wait_until
from .wire import Connection, produce

PRODUCE = 0


class DroppingProxy:
    """Forwards Kafka connections to a server; drops some Produce responses by closing the
    connection instead of delivering them, which makes the client retry the batch."""

    def __init__(self, target_port: int, *, drop_rate: float, seed: int) -> None:
        self.target_port = target_port
        self.drop_rate = drop_rate
        self.dropped = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while not self._stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, server]
            api_keys: dict[int, int] = {}
            for target in (self._requests, self._responses):
                thread = threading.Thread(
                    target=target, args=(client, server, api_keys), daemon=True
                )
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _frame(source: socket.socket) -> bytes | None:
        header = _read(source, 4)
        if header is None:
            return None
        body = _read(source, struct.unpack(">i", header)[0])
        return None if body is None else header + body

    def _requests(self, client: socket.socket, server: socket.socket, keys: dict[int, int]) -> None:
        while (frame := self._frame(client)) is not None:
            api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
            keys[correlation_id] = api_key
            try:
                server.sendall(frame)
            except OSError:
                break
        _close(client, server)

    def _responses(
        self, client: socket.socket, server: socket.socket, keys: dict[int, int]
    ) -> None:
        while (frame := self._frame(server)) is not None:
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            if keys.pop(correlation_id, None) == PRODUCE:
                with self._lock:
                    drop = self._rng.random() < self.drop_rate
                    self.dropped += drop
                if drop:
                    break
            try:
                client.sendall(frame)
            except OSError:
                break
        _close(client, server)

    def close(self) -> None:
        self._stopping = True
        self.listener.close()
        for sock in self._sockets:
            _close(sock)
        for thread in self._threads:
            thread.join(5)
        self._accepter.join(5)


def _read(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_retries_after_dropped_responses_write_no_duplicates_in_order(start_server: Any) -> None:
    server_port = _free_port()
    proxy = DroppingProxy(server_port, drop_rate=0.25, seed=11)
    try:
        server = start_server(
            listeners=f"PLAINTEXT://127.0.0.1:{server_port}",
            advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}",
        )
        bootstrap = server.bootstrap_servers
        assert bootstrap.endswith(f":{proxy.port}")
        topic = unique_topic("idempotent")
        create_topic(bootstrap, topic, partitions=2)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 20,
                "max.in.flight.requests.per.connection": 5,
                "retry.backoff.ms": 20,
                "socket.timeout.ms": 10_000,
            }
        )
        failures: list[Any] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error)

        sent: dict[int, list[bytes]] = {0: [], 1: []}
        for index in range(3000):
            partition = index % 2
            value = b"%06d" % index
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
            sent[partition].append(value)
            if index % 100 == 99:
                producer.poll(0)
        assert producer.flush(DEADLINE_S * 2) == 0
        assert failures == []
        assert proxy.dropped > 0, "no response was dropped: the test proved nothing"
        seen = consume(
            bootstrap,
            topic,
            {0: OFFSET_BEGINNING, 1: OFFSET_BEGINNING},
            {p: len(v) for p, v in sent.items()},
        )
        received: dict[int, list[bytes]] = {0: [], 1: []}
        for record in seen:
            assert record.partition is not None
            received[record.partition].append(record.value or b"")
        assert received == sent
    finally:
        proxy.close()


def test_duplicate_detection_survives_a_restart(start_server: Any) -> None:
    server = start_server()
    topic = unique_topic("idempotent-restart")
    create_topic(server.bootstrap_servers, topic, partitions=1)
    batches = [
        build_batch(
            [NewRecord(value=b"v%d-%d" % (sequence, i)) for i in range(3)],
            producer_id=4242,
            producer_epoch=0,
            base_sequence=sequence * 3,
            timestamp=now_ms(),  # (a producer whose last batch is from 1970 expires at once)
        )
        for sequence in range(4)
    ]
    with Connection(server.host, server.port) as connection:
        offsets = [produce(connection, topic, 0, batch).base_offset for batch in batches]
    assert offsets == [0, 3, 6, 9]
    server.restart()
    with Connection(server.host, server.port) as connection:
        retried = produce(connection, topic, 0, batches[-1])
        assert (retried.error_code, retried.base_offset) == (0, 9)  # the original offset
        gap = build_batch(
            [NewRecord(value=b"x")], producer_id=4242, producer_epoch=0, base_sequence=20
        )
        assert produce(connection, topic, 0, gap).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        following = build_batch(
            [NewRecord(value=b"y")], producer_id=4242, producer_epoch=0, base_sequence=12
        )
        assert produce(connection, topic, 0, following).base_offset == 12


def test_idle_producer_ids_expire_and_may_write_again(start_server: Any) -> None:
    """Kafka's rule: a producer with no open transaction whose last batch is
    producer.id.expiration.ms old is forgotten at the next check; DescribeProducers lists it
    no more, and its next batch, whatever its sequence, is taken as a new producer's."""
    server = start_server(
        producer_id_expiration_ms="3000", producer_id_expiration_check_interval_ms="100"
    )
    topic = unique_topic("idempotent-expiry")
    create_topic(server.bootstrap_servers, topic, partitions=1)

    def active_producers(connection: Connection) -> list[int]:
        answer = connection.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        partition = answer.topics[0].partitions[0]
        assert partition.error_code == 0
        return [p.producer_id for p in partition.active_producers]

    def idempotent(sequence: int) -> bytes:
        return build_batch(
            [NewRecord(value=b"s%d" % sequence)],
            producer_id=777,
            producer_epoch=0,
            base_sequence=sequence,
            timestamp=now_ms(),
        )

    with Connection(server.host, server.port) as connection:
        assert produce(connection, topic, 0, idempotent(0)).error_code == 0
        assert active_producers(connection) == [777]
        assert produce(connection, topic, 0, idempotent(5)).error_code == 45  # a gap: known
        wait_until(
            lambda: active_producers(connection) == [],
            timeout=30,
            message="producer 777 still remembered after producer.id.expiration.ms",
        )
        again = produce(connection, topic, 0, idempotent(5))
        assert (again.error_code, again.base_offset) == (0, 1)
        assert active_producers(connection) == [777]
