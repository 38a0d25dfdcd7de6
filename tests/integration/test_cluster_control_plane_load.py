"""The quorum keeps its leader while a client floods the broker listener of the node that leads
it: broker and controller share one event loop in a combined node, so a flood that took the loop
for seconds at a time would starve the quorum's fetches and move the controller (seen before a
connection could queue more than one costly request on the loop)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol.adapter import encode_request

from .cluster import COMBINED, build_cluster, wait_for
from .test_cluster_quorum import _quorum
from .wire import Connection

FLOODERS = 50
FLOOD_S = 10.0


def test_a_client_flood_at_the_quorum_leader_moves_no_controller(start_server, tmp_path: Path):
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [NewTopic(f"wide-{index}", 3, 3) for index in range(20)]
    topics.append(NewTopic("acked", 1, 3, config={"min.insync.replicas": "2"}))
    for future in admin.create_topics(topics).values():
        future.result(30)
    before = _quorum(cluster.brokers()[0].bootstrap)
    leader, epoch = int(before.leader_id), int(before.leader_epoch)
    target = cluster.nodes[leader]
    every_topic = {"topics": None, "allow_auto_topic_creation": False}
    host, port = target.bootstrap.split(":")
    with Connection(host, int(port), timeout=20) as connection:
        connection.request(3, 12, every_topic)  # (the node loads the answer's types once)
    flood = encode_request(3, 12, 1, "flood", every_topic) * 20_000
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def flooder() -> None:
        sock = socket.create_connection((host, int(port)), timeout=10)
        sockets.append(sock)
        sock.settimeout(0.5)
        sent = 0
        while sent < len(flood) and not stop.is_set():
            try:
                sent += sock.send(flood[sent : sent + (1 << 20)])
            except TimeoutError:
                continue
            except OSError:
                return

    others = cluster.bootstrap_without(leader)
    observer = next(n.bootstrap for n in cluster.brokers() if n.node_id != leader)
    producer = Producer({"bootstrap.servers": others, "acks": "all", "linger.ms": 0})
    delivered: list[float] = []

    def acked(error: object, _message: object) -> None:
        if error is None:
            delivered.append(time.monotonic())

    threads = [threading.Thread(target=flooder, daemon=True) for _ in range(FLOODERS)]
    quorum_seen: list[tuple[int, int]] = []
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + FLOOD_S
        while time.monotonic() < deadline:
            producer.produce("acked", value=b"during the flood", on_delivery=acked)
            producer.poll(0.1)
            answer = _quorum(observer)
            quorum_seen.append((int(answer.leader_id), int(answer.leader_epoch)))
        assert producer.flush(30) == 0
    finally:
        stop.set()
        for sock in sockets:
            sock.close()
        for thread in threads:
            thread.join(10)
    assert set(quorum_seen) == {(leader, epoch)}, f"the quorum moved: {sorted(set(quorum_seen))}"
    wait_for(
        lambda: _quorum(observer).leader_epoch == epoch,
        timeout_s=10,
        what="the quorum still led by the same node afterwards",
    )
    assert len(delivered) >= FLOOD_S  # acks=all records went on being acknowledged
