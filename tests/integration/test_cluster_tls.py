"""A cluster whose every link is TLS: clients, replica fetchers, the broker-to-controller channel
and the metadata quorum's transport connect to SSL listeners that require client certificates,
presenting the node's keystore and checking the peer's host name."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.certificates import make_certificates

from .cluster import COMBINED, build_cluster, wait_for

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def test_a_cluster_replicates_and_fails_over_with_tls_on_every_link(
    start_server, tmp_path: Path
) -> None:
    certificates = make_certificates(tmp_path / "certificates")
    tls = {
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates.path("server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certificates.path("ca.pem"),
        "ssl.client.auth": "required",
        "ssl.endpoint.identification.algorithm": "https",
    }
    cluster = build_cluster(
        start_server, tmp_path, roles=[COMBINED] * 3, extra={**FAST, **tls}, client_listener="SSL"
    )
    client = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": certificates.path("ca.pem"),
        "ssl.certificate.location": certificates.path("client.crt"),
        "ssl.key.location": certificates.path("client.key"),
    }
    admin = AdminClient(client)
    admin.create_topics([NewTopic("secured", 1, 3, config={"min.insync.replicas": "2"})])[
        "secured"
    ].result(30)

    def fully_replicated() -> object:
        topic = admin.list_topics(timeout=5).topics.get("secured")
        if topic is None or topic.error is not None:
            return None
        partition = topic.partitions[0]
        return partition if sorted(partition.isrs) == [1, 2, 3] else None

    first_leader = wait_for(fully_replicated, timeout_s=30, what="an ISR of three").leader
    producer = Producer({**client, "acks": "all", "enable.idempotence": True})
    sent = [b"over-tls-%04d" % index for index in range(500)]
    for value in sent:
        producer.produce("secured", value=value, partition=0)
    assert producer.flush(30) == 0

    cluster.stop(first_leader)  # controlled shutdown: the leadership moves to a follower
    survivors = ",".join(n.bootstrap for n in cluster.brokers() if n.node_id != first_leader)
    admin = AdminClient({**client, "bootstrap.servers": survivors})

    def new_leader() -> object:
        partition = admin.list_topics(timeout=5).topics["secured"].partitions[0]
        return partition.leader if partition.leader not in (-1, first_leader) else None

    leader = wait_for(new_leader, timeout_s=30, what="a new leader")
    consumer = Consumer(
        {**client, "bootstrap.servers": survivors, "group.id": "tls", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("secured", 0, 0)])
    received: list[bytes] = []

    def read_all() -> object:
        for message in consumer.consume(num_messages=len(sent), timeout=0.5):
            if message.error() is None:
                received.append(message.value())
        return len(received) >= len(sent)

    wait_for(read_all, timeout_s=30, what=f"the records from the new leader {leader}")
    consumer.close()
    assert received == sent
    for node in cluster.nodes.values():
        assert node.server is not None
        assert "TLS handshake failed" not in node.server.output_tail(100_000)
    cluster.stop_all()
