"""The Spark source and sink on a SASL_SSL listener, configured the way a Spark job configures
Spark's Kafka connector: `kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config` and a PEM truststore in the Java client's names."""

from __future__ import annotations

import pytest

from tests.certificates import Certificates, make_certificates

from .conftest import MoldauServer, ServerFactory
from .support import unique_topic
from .test_sasl_listeners import SCRAM_MODULE, format_with_scram
from .test_spark_support import spark
from .test_tls_listeners import consume_all, create_topic, listener_port

__all__ = ["spark"]

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def secure(
    module_server_factory: ServerFactory,
    certificates: Certificates,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    data_dir = tmp_path_factory.mktemp("spark-sasl-data")
    format_with_scram(data_dir, "SCRAM-SHA-512=[name=spark,password=spark-secret]")
    server: MoldauServer = module_server_factory(
        log_dirs=str(data_dir),
        listeners="PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        num_partitions="2",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
        },
    )
    return f"127.0.0.1:{listener_port(server, 'SECURE')}"


def _options(certificates: Certificates, password: str) -> dict[str, str]:
    return {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            f'{SCRAM_MODULE} required username="spark" password="{password}";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": certificates.path("ca.pem"),
    }


def _client(certificates: Certificates) -> dict[str, str]:
    return {
        **SCRAM,
        "sasl.username": "spark",
        "sasl.password": "spark-secret",
        "ssl.ca.location": certificates.path("ca.pem"),
    }


def test_the_sink_writes_and_the_source_reads_over_sasl_ssl(
    spark: object, secure: str, certificates: Certificates
) -> None:
    topic = create_topic(secure, _client(certificates), partitions=2)
    rows = [(f"k{index}", f"v{index}") for index in range(500)]
    frame = spark.createDataFrame(rows, "key string, value string")  # type: ignore[attr-defined]
    writer = frame.write.format("moldau").option("kafka.bootstrap.servers", secure)
    for key, value in {**_options(certificates, "spark-secret"), "topic": topic}.items():
        writer = writer.option(key, value)
    writer.mode("append").save()

    written = consume_all(secure, _client(certificates), topic, len(rows))
    assert sorted(written) == sorted(value.encode() for _, value in rows)

    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", secure)  # type: ignore[attr-defined]
    for key, value in {**_options(certificates, "spark-secret"), "subscribe": topic}.items():
        reader = reader.option(key, value)
    read = reader.load().select("key", "value").collect()
    assert sorted((row.key.decode(), row.value.decode()) for row in read) == sorted(rows)


def test_a_wrong_password_or_an_unknown_security_option_fails_the_job(
    spark: object, secure: str, certificates: Certificates
) -> None:
    topic = unique_topic("spark-sasl-refused")
    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", secure)  # type: ignore[attr-defined]
    for key, value in {**_options(certificates, "wrong"), "subscribe": topic}.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=r"(?i)authentication"):
        reader.load().collect()

    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", secure)  # type: ignore[attr-defined]
    options = {
        **_options(certificates, "spark-secret"),
        "kafka.ssl.keymanager.algorithm": "SunX509",
        "subscribe": topic,
    }
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=r"ssl\.keymanager\.algorithm"):
        reader.load().collect()
