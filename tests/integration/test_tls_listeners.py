"""TLS listeners against a real `moldau server`, driven by the real clients.

One server listens in the clear (PLAINTEXT) and over TLS (SSL, `ssl.client.auth=required`, PEM
key and truststore files). Every client family produces and consumes with a good certificate;
a client with no certificate, an expired one or one of another authority is refused at the
handshake (the broker logs one line and serves on); a plaintext client on the TLS port and a TLS
client on the plaintext port fail cleanly; stalled and garbage handshakes leave it serving.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.certificates import CLIENT_PRINCIPAL, KEY_PASSWORD, Certificates, make_certificates

from .conftest import MoldauServer, ServerFactory
from .test_kafkajs import run_script

DEADLINE_S = 30.0
HANDSHAKE_TIMEOUT_MS = 3000


def listener_port(server: MoldauServer, name: str) -> int:
    match = re.search(rf"listening on {name}://\S+ \(port (\d+)", server.output_tail(400))
    assert match, f"no {name} listener in the output:\n{server.output_tail()}"
    return int(match.group(1))


def log_lines(server: MoldauServer, pattern: str) -> list[str]:
    return [line for line in server.output_tail(100_000).splitlines() if re.search(pattern, line)]


def poll_until(condition: Any, what: str, timeout_s: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def tls_server(module_server_factory: ServerFactory, certificates: Certificates) -> MoldauServer:
    return module_server_factory(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        ssl_keystore_type="PEM",
        ssl_keystore_location=certificates.path("server.pem"),
        ssl_truststore_type="PEM",
        ssl_truststore_location=certificates.path("ca.pem"),
        ssl_client_auth="required",
        socket_request_timeout_ms=str(HANDSHAKE_TIMEOUT_MS),
        num_partitions="2",
    )


@pytest.fixture(scope="module")
def ssl_bootstrap(tls_server: MoldauServer) -> str:
    return f"127.0.0.1:{listener_port(tls_server, 'SSL')}"


def rdkafka_settings(certificates: Certificates, identity: str | None = "client") -> dict[str, Any]:
    settings = {
        "security.protocol": "SSL",
        "ssl.ca.location": certificates.path("ca.pem"),
    }
    if identity is not None:
        settings["ssl.certificate.location"] = certificates.path(f"{identity}.crt")
        settings["ssl.key.location"] = certificates.path(f"{identity}.key")
    return settings


def create_topic(bootstrap: str, settings: dict[str, Any], partitions: int = 2) -> str:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(DEADLINE_S)
    return topic


def consume_all(bootstrap: str, settings: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            **settings,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_confluent_kafka_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates
) -> None:
    settings = rdkafka_settings(certificates)
    topic = create_topic(ssl_bootstrap, settings)
    producer = Producer({"bootstrap.servers": ssl_bootstrap, "acks": "all", **settings})
    sent = [b"record-%d-" % index + bytes(index * 37 % 5000) for index in range(2000)]
    for value in sent:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE_S) == 0
    assert sorted(consume_all(ssl_bootstrap, settings, topic, len(sent))) == sorted(sent)


def test_kcat_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates, kcat: str
) -> None:
    settings = rdkafka_settings(certificates)
    topic = create_topic(ssl_bootstrap, settings, partitions=1)
    options = [arg for name, value in settings.items() for arg in ("-X", f"{name}={value}")]
    lines = "".join(f"line-{index}\n" for index in range(100))
    subprocess.run(
        [kcat, "-b", ssl_bootstrap, *options, "-P", "-t", topic],
        input=lines.encode(),
        check=True,
        timeout=DEADLINE_S,
    )
    read = subprocess.run(
        [kcat, "-b", ssl_bootstrap, *options, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=DEADLINE_S,
    )
    assert read.stdout.decode() == lines


def test_kafka_python_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    tls = {
        "security_protocol": "SSL",
        "ssl_cafile": certificates.path("ca.pem"),
        "ssl_certfile": certificates.path("client.crt"),
        "ssl_keyfile": certificates.path("client.key"),
    }
    topic = create_topic(ssl_bootstrap, rdkafka_settings(certificates), partitions=1)
    producer = KafkaProducer(bootstrap_servers=ssl_bootstrap, acks="all", **tls)
    for index in range(200):
        producer.send(topic, b"kp-%d" % index)
    producer.flush(DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=ssl_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **tls,
    )
    values = [message.value for _, message in zip(range(200), consumer, strict=False)]
    consumer.close()
    assert values == [b"kp-%d" % index for index in range(200)]


def test_aiokafka_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = create_topic(ssl_bootstrap, rdkafka_settings(certificates), partitions=1)

    async def run() -> list[bytes]:
        context = create_ssl_context(
            cafile=certificates.path("ca.pem"),
            certfile=certificates.path("client.crt"),
            keyfile=certificates.path("client.key"),
        )
        tls = {"security_protocol": "SSL", "ssl_context": context}
        async with AIOKafkaProducer(bootstrap_servers=ssl_bootstrap, acks="all", **tls) as p:
            for index in range(200):
                await p.send(topic, b"aio-%d" % index)
            await p.flush()
        async with AIOKafkaConsumer(
            topic, bootstrap_servers=ssl_bootstrap, auto_offset_reset="earliest", **tls
        ) as consumer:
            values = []
            async with asyncio.timeout(DEADLINE_S):
                while len(values) < 200:
                    batch = await consumer.getmany(timeout_ms=500)
                    values += [m.value for messages in batch.values() for m in messages]
            return values

    assert asyncio.run(run()) == [b"aio-%d" % index for index in range(200)]


def test_kafkajs_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates, node: str
) -> None:
    topic = create_topic(ssl_bootstrap, rdkafka_settings(certificates), partitions=1)
    tls = {
        "ca": certificates.path("ca.pem"),
        "cert": certificates.path("client.crt"),
        "key": certificates.path("client.key"),
    }
    records = [
        {"key": None, "value": "anMtJWQ=", "headers": [], "partition": 0, "timestamp": 1}
        for _ in range(50)
    ]
    produced = run_script(
        node,
        "produce.js",
        {
            "brokers": ssl_bootstrap,
            "ssl": tls,
            "topic": topic,
            "codec": "none",
            "maxBytes": 1_000_000,
            "records": records,
        },
    )
    assert len(produced["placed"]) == 50
    consumed = run_script(
        node,
        "consume.js",
        {
            "brokers": ssl_bootstrap,
            "ssl": tls,
            "topic": topic,
            "groupId": "kjs",
            "expected": {"0": 50},
            "seek": None,
            "timeoutMs": 30_000,
            "maxBytes": 1_000_000,
        },
    )
    assert len(consumed["records"]) == 50


def test_the_moldau_cli_produces_and_consumes_over_tls(
    ssl_bootstrap: str, certificates: Certificates
) -> None:
    topic = create_topic(ssl_bootstrap, rdkafka_settings(certificates), partitions=1)
    settings = [
        "-X", "security.protocol=ssl",
        "-X", f"ssl.ca.location={certificates.path('ca.pem')}",
        "-X", f"ssl.keystore.location={certificates.path('client.p12')}",
        "-X", f"ssl.keystore.password={KEY_PASSWORD}",
    ]  # fmt: skip
    moldau = [sys.executable, "-m", "moldau"]
    subprocess.run(
        [*moldau, "produce", topic, "-b", ssl_bootstrap, *settings],
        input=b"one\ntwo\n",
        check=True,
        timeout=DEADLINE_S,
    )
    read = subprocess.run(
        [*moldau, "consume", topic, "-b", ssl_bootstrap, *settings, "-o", "beginning", "-e",
         "--format", "text"],
        capture_output=True,
        check=True,
        timeout=DEADLINE_S,
    )  # fmt: skip
    assert read.stdout.decode().split() == ["one", "two"]


@pytest.mark.parametrize(
    ("identity", "logged"),
    [
        (None, "peer did not return a certificate"),
        ("expired", "certificate has expired"),
        ("foreign", "self-signed certificate in certificate chain"),
    ],
)
def test_a_client_without_a_trusted_certificate_is_refused_and_others_are_served(
    tls_server: MoldauServer,
    ssl_bootstrap: str,
    certificates: Certificates,
    identity: str | None,
    logged: str,
) -> None:
    before = len(log_lines(tls_server, logged))
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": ssl_bootstrap,
            "error_cb": errors.append,
            "message.timeout.ms": 3000,
            **rdkafka_settings(certificates, identity),
        }
    )
    producer.produce("refused", value=b"x")
    producer.flush(5)
    poll_until(lambda: errors, "the client's error callback")
    assert any("SSL" in error.str() or error.code() == KafkaError._SSL for error in errors), [
        error.str() for error in errors
    ]
    lines = poll_until(
        lambda: log_lines(tls_server, logged)[before:], f"the broker's line: {logged}"
    )
    assert all("TLS handshake failed" in line for line in lines)
    assert "Traceback" not in tls_server.output_tail(2000)
    good = AdminClient({"bootstrap.servers": ssl_bootstrap, **rdkafka_settings(certificates)})
    assert good.list_topics(timeout=10).brokers


def test_a_plaintext_client_on_the_tls_port_fails_cleanly(
    tls_server: MoldauServer, ssl_bootstrap: str
) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient({"bootstrap.servers": ssl_bootstrap, "error_cb": errors.append})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's transport failure
        admin.list_topics(timeout=3)
    poll_until(lambda: log_lines(tls_server, "a plaintext client"), "the broker's line")


def test_a_tls_client_on_the_plaintext_port_fails_cleanly(
    tls_server: MoldauServer, certificates: Certificates
) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": tls_server.bootstrap_servers,
            "error_cb": errors.append,
            **rdkafka_settings(certificates),
        }
    )
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's transport failure
        admin.list_topics(timeout=3)
    plain = AdminClient({"bootstrap.servers": tls_server.bootstrap_servers})
    assert plain.list_topics(timeout=10).brokers


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def test_stalled_and_garbage_handshakes_leave_the_node_serving(
    tls_server: MoldauServer, ssl_bootstrap: str, certificates: Certificates
) -> None:
    """500 connections that send half a ClientHello and stall, 200 that send garbage: the node
    keeps serving a good client, its memory stays bounded, and the stalled ones are closed
    once `socket.request.timeout.ms` has passed."""
    assert tls_server.process is not None
    rss_before = _rss_kb(tls_server.process.pid)
    port = int(ssl_bootstrap.rsplit(":", 1)[1])
    hello = _client_hello(certificates)
    stalled = []
    for _ in range(500):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(hello[: len(hello) // 2])
        stalled.append(sock)
    for index in range(200):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(bytes([0x16, 0x03, 0x01, 0x40, 0x00]) + bytes(range(256)) * (index % 8))
    good = AdminClient({"bootstrap.servers": ssl_bootstrap, **rdkafka_settings(certificates)})
    started = time.monotonic()
    assert good.list_topics(timeout=10).brokers
    served_in = time.monotonic() - started
    rss_after = _rss_kb(tls_server.process.pid)
    for sock in stalled:
        sock.settimeout(HANDSHAKE_TIMEOUT_MS / 1000 * 4)
        assert sock.recv(100) == b"", "a stalled handshake was not closed"
        sock.close()
    print(f"served in {served_in:.2f} s; RSS {rss_before} -> {rss_after} KiB with 500 stalled")
    assert rss_after - rss_before < 100_000
    assert tls_server.process.poll() is None


def _client_hello(certificates: Certificates) -> bytes:
    context = ssl.create_default_context(cafile=certificates.path("ca.pem"))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def test_the_connection_keeps_the_principal_of_the_client_certificate(
    certificates: Certificates,
) -> None:
    """The principal is kept on the connection for authorization: a listener in this process
    with a processor that answers with it."""
    from moldau.broker.security import listener_tls
    from moldau.config.values import BrokerConfig
    from moldau.net.listener import Endpoint, Listener

    config = BrokerConfig(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
            "ssl.client.auth": "requested",
        }
    )

    def answer_with_principal(frame: Any, info: Any) -> bytes:
        text = json.dumps([info.principal, info.tls_version, info.zero_copy]).encode()
        return len(text).to_bytes(4, "big") + text

    async def ask(identity: str | None) -> list[Any]:
        listener = Listener(
            Endpoint("SSL", "127.0.0.1", 0),
            answer_with_principal,
            security_protocol="SSL",
            max_frame_size=1 << 20,
            tls=listener_tls(config, "SSL"),
        )
        await listener.start()
        await listener.start_serving()
        try:
            context = ssl.create_default_context(cafile=certificates.path("ca.pem"))
            if identity:
                context.load_cert_chain(certificates.path(f"{identity}.pem"))
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", listener.bound_port, ssl=context, server_hostname="localhost"
            )
            writer.write(b"\x00\x00\x00\x01x")
            size = int.from_bytes(await reader.readexactly(4), "big")
            answer = json.loads(await reader.readexactly(size))
            writer.close()
            return answer
        finally:
            await listener.close()

    assert asyncio.run(ask("client")) == [CLIENT_PRINCIPAL, "TLSv1.3", False]
    assert asyncio.run(ask(None)) == ["User:ANONYMOUS", "TLSv1.3", False]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ssl_keystore_location": "{server-encrypted.pem}", "ssl_key_password": "wrong"},
         "wrong ssl.key.password"),
        ({"ssl_keystore_location": "/nonexistent/server.pem"}, "cannot read ssl.keystore.location"),
        ({"ssl_keystore_location": None}, "has no key"),
        ({"listeners": "SASL_SSL://127.0.0.1:0"}, "is GSSAPI (Kafka's default)"),
        ({"listeners": "SASL_SSL://127.0.0.1:0", "sasl_enabled_mechanisms": "OAUTHBEARER"},
         "enables OAUTHBEARER but listener.name.sasl_ssl.oauthbearer.sasl.jaas.config is not set"),
    ],
)  # fmt: skip
def test_a_listener_that_cannot_set_up_tls_stops_the_node_with_one_error_line(
    start_server: ServerFactory,
    certificates: Certificates,
    overrides: dict[str, str | None],
    message: str,
) -> None:
    settings: dict[str, str] = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl_keystore_type": "PEM",
        "ssl_keystore_location": certificates.path("server.pem"),
    }
    for name, value in overrides.items():
        if value is None:
            settings.pop(name)
        else:
            settings[name] = certificates.path(value.strip("{}")) if value[0] == "{" else value
    server = start_server(launch_only=True, **settings)
    assert server.wait_exited(DEADLINE_S) != 0
    errors = [line for line in server.output_tail(200).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], server.output_tail()
    assert "Traceback" not in server.output_tail(200)
    assert "Moldau ready" not in server.output_tail(200)
