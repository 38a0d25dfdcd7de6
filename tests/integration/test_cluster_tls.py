"""A cluster whose every link is TLS: clients, replica fetchers, the broker-to-controller channel
and the metadata quorum's transport connect to SSL listeners that require client certificates,
presenting the node's keystore and checking the peer's host name."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.certificates import make_certificates

from .cluster import COMBINED, build_cluster, create_replicated_topic, read_partition, wait_for

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
    first_leader = create_replicated_topic(client, "secured")
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
    received = read_partition(
        {**client, "bootstrap.servers": survivors},
        "secured",
        len(sent),
        what=f"the records from the new leader {leader}",
    )
    assert received == sent
    for node in cluster.nodes.values():
        assert node.server is not None
        assert "TLS handshake failed" not in node.server.output_tail(100_000)
    cluster.stop_all()
