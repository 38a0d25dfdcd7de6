"""A cluster whose every link authenticates: brokers reach each other over SASL_SSL with
SCRAM-SHA-512 (credentials from `moldau storage format --add-scram`, in the metadata log from
the first start) and the controllers over SASL_PLAINTEXT with PLAIN (SCRAM credentials live in
the metadata log the controllers serve, so Kafka uses PLAIN there too). An RF 3 topic
replicates, and the nodes log no failed authentication."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.certificates import make_certificates

from .cluster import COMBINED, build_cluster, create_replicated_topic, read_partition, wait_for
from .test_cluster_tls import FAST

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_a_cluster_replicates_with_sasl_on_every_link(start_server, tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path / "certificates")
    sasl = {
        "listener.security.protocol.map": "BROKER:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates.path("server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certificates.path("ca.pem"),
        "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": (
            f'{SCRAM} required username="broker" password="broker-secret";'
        ),
        "listener.name.controller.plain.sasl.jaas.config": (
            f'{PLAIN} required username="controller" password="controller-secret" '
            'user_controller="controller-secret";'
        ),
    }
    cluster = build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**FAST, **sasl},
        client_listener="BROKER",
        format_arguments=[
            "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
            "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
        ],
    )  # fmt: skip
    client = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": certificates.path("ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    leader = create_replicated_topic(client, "secured")
    producer = Producer({**client, "acks": "all"})
    sent = [b"over-sasl-%04d" % index for index in range(300)]
    for value in sent:
        producer.produce("secured", value=value, partition=0)
    assert producer.flush(30) == 0
    follower = next(n for n in cluster.brokers() if n.node_id != leader)
    received = read_partition(
        {**client, "bootstrap.servers": follower.bootstrap}, "secured", len(sent), what="records"
    )
    assert received == sent
    admin = AdminClient(client)

    def replicated_everywhere() -> object:
        partition = admin.list_topics(timeout=5).topics["secured"].partitions[0]
        return sorted(partition.isrs) == [1, 2, 3]

    wait_for(replicated_everywhere, timeout_s=30, what="the ISR after the writes")
    for node in cluster.nodes.values():
        assert node.server is not None
        assert "failed authentication" not in node.server.output_tail(100_000)
    cluster.stop_all()
