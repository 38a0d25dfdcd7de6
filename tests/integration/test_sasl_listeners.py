"""SASL listeners against a real `moldau server`, driven by the real clients.

One server listens in the clear without authentication (PLAINTEXT), with SASL in the clear
(CLEAR: SASL_PLAINTEXT, PLAIN and SCRAM-SHA-512) and with SASL over TLS (SECURE: SASL_SSL,
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512). PLAIN users come from the listeners' JAAS configs,
SCRAM users from `moldau storage format --add-scram` and AlterUserScramCredentials. Every
client family produces and consumes; a wrong password, an unknown user and a mechanism the
listener does not enable each fail with the client's authentication error, one broker line,
and the broker serves the others on.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.certificates import Certificates, make_certificates

from .conftest import MoldauServer, ServerFactory
from .test_kafkajs import run_script
from .test_tls_listeners import (
    consume_all,
    create_topic,
    listener_port,
    log_lines,
    poll_until,
)

DEADLINE_S = 30.0
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_USERS = f'{PLAIN_MODULE} required user_admin="admin-secret" user_carol="carol;\\"secret";'
ALICE = ("alice", "alice-secret")  # SCRAM, from storage format


def format_with_scram(data_dir: Path, *credentials: str) -> None:
    arguments = [a for text in credentials for a in ("--add-scram", text)]
    subprocess.run(
        [sys.executable, "-m", "moldau", "storage", "format",
         "--override", f"log.dirs={data_dir}", *arguments],
        check=True, capture_output=True, timeout=DEADLINE_S,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def sasl_server(
    module_server_factory: ServerFactory,
    certificates: Certificates,
    tmp_path_factory: pytest.TempPathFactory,
) -> MoldauServer:
    data_dir = tmp_path_factory.mktemp("sasl-data")
    format_with_scram(
        data_dir,
        "SCRAM-SHA-512=[name=alice,password=alice-secret]",
        'SCRAM-SHA-256=[name=alice,iterations=8192,password="alice-secret"]',
    )
    return module_server_factory(
        log_dirs=str(data_dir),
        listeners="PLAINTEXT://127.0.0.1:0,CLEAR://127.0.0.1:0,SECURE://127.0.0.1:0",
        num_partitions="1",
        **{
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,CLEAR:SASL_PLAINTEXT,SECURE:SASL_SSL"
            ),
            "listener.name.clear.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.secure.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.clear.plain.sasl.jaas.config": PLAIN_USERS,
            "listener.name.secure.plain.sasl.jaas.config": PLAIN_USERS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
        },
    )


@pytest.fixture(scope="module")
def clear(sasl_server: MoldauServer) -> str:
    return f"127.0.0.1:{listener_port(sasl_server, 'CLEAR')}"


@pytest.fixture(scope="module")
def secure(sasl_server: MoldauServer) -> str:
    return f"127.0.0.1:{listener_port(sasl_server, 'SECURE')}"


def rdkafka(
    mechanism: str, user: tuple[str, str], certificates: Certificates | None = None
) -> dict[str, Any]:
    settings = {
        "security.protocol": "SASL_SSL" if certificates else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user[0],
        "sasl.password": user[1],
    }
    if certificates is not None:
        settings["ssl.ca.location"] = certificates.path("ca.pem")
    return settings


def round_trip(bootstrap: str, settings: dict[str, Any], count: int = 200) -> None:
    topic = create_topic(bootstrap, settings, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    sent = [b"sasl-%d" % index for index in range(count)]
    for value in sent:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE_S) == 0
    assert consume_all(bootstrap, settings, topic, count) == sent


@pytest.mark.parametrize(
    ("listener", "mechanism", "user"),
    [
        ("clear", "PLAIN", ("carol", 'carol;"secret')),
        ("clear", "SCRAM-SHA-512", ALICE),
        ("secure", "PLAIN", ("admin", "admin-secret")),
        ("secure", "SCRAM-SHA-512", ALICE),
        ("secure", "SCRAM-SHA-256", ALICE),
    ],
)
def test_confluent_kafka_produces_and_consumes(
    request: pytest.FixtureRequest,
    certificates: Certificates,
    listener: str,
    mechanism: str,
    user: tuple[str, str],
) -> None:
    bootstrap = request.getfixturevalue(listener)
    round_trip(bootstrap, rdkafka(mechanism, user, certificates if listener == "secure" else None))


@pytest.mark.parametrize(
    ("listener", "mechanism"), [("clear", "PLAIN"), ("secure", "SCRAM-SHA-512")]
)
def test_kcat_produces_and_consumes(
    request: pytest.FixtureRequest,
    certificates: Certificates,
    kcat: str,
    listener: str,
    mechanism: str,
) -> None:
    bootstrap = request.getfixturevalue(listener)
    user = ("admin", "admin-secret") if mechanism == "PLAIN" else ALICE
    settings = rdkafka(mechanism, user, certificates if listener == "secure" else None)
    topic = create_topic(bootstrap, settings, partitions=1)
    options = [arg for name, value in settings.items() for arg in ("-X", f"{name}={value}")]
    lines = "".join(f"line-{index}\n" for index in range(100))
    subprocess.run(
        [kcat, "-b", bootstrap, *options, "-P", "-t", topic],
        input=lines.encode(), check=True, timeout=DEADLINE_S,
    )  # fmt: skip
    read = subprocess.run(
        [kcat, "-b", bootstrap, *options, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True, check=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert read.stdout.decode() == lines


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes_over_sasl_ssl(
    secure: str, certificates: Certificates, mechanism: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    user = ("admin", "admin-secret") if mechanism == "PLAIN" else ALICE
    security = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": certificates.path("ca.pem"),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user[0],
        "sasl_plain_password": user[1],
    }
    topic = create_topic(secure, rdkafka(mechanism, user, certificates), partitions=1)
    producer = KafkaProducer(bootstrap_servers=secure, acks="all", **security)
    for index in range(100):
        producer.send(topic, b"kp-%d" % index)
    producer.flush(DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=secure,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **security,
    )
    values = [message.value for _, message in zip(range(100), consumer, strict=False)]
    consumer.close()
    assert values == [b"kp-%d" % index for index in range(100)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_aiokafka_produces_and_consumes_over_sasl_ssl(
    secure: str, certificates: Certificates, mechanism: str
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    user = ("admin", "admin-secret") if mechanism == "PLAIN" else ALICE
    topic = create_topic(secure, rdkafka(mechanism, user, certificates), partitions=1)

    async def run() -> list[bytes]:
        security = {
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=certificates.path("ca.pem")),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user[0],
            "sasl_plain_password": user[1],
        }
        async with AIOKafkaProducer(bootstrap_servers=secure, acks="all", **security) as p:
            for index in range(100):
                await p.send(topic, b"aio-%d" % index)
            await p.flush()
        async with AIOKafkaConsumer(
            topic, bootstrap_servers=secure, auto_offset_reset="earliest", **security
        ) as consumer:
            values: list[bytes] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(values) < 100:
                    batch = await consumer.getmany(timeout_ms=500)
                    values += [m.value for messages in batch.values() for m in messages]
            return values

    assert asyncio.run(run()) == [b"aio-%d" % index for index in range(100)]


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-512"])
def test_kafkajs_produces_and_consumes_over_sasl_ssl(
    secure: str, certificates: Certificates, node: str, mechanism: str
) -> None:
    user = ("admin", "admin-secret") if mechanism == "plain" else ALICE
    topic = create_topic(secure, rdkafka(mechanism.upper(), user, certificates), partitions=1)
    common = {
        "brokers": secure,
        "ssl": {"ca": certificates.path("ca.pem")},
        "sasl": {"mechanism": mechanism, "username": user[0], "password": user[1]},
        "topic": topic,
        "maxBytes": 1_000_000,
    }
    records = [
        {"key": None, "value": "anMtJWQ=", "headers": [], "partition": 0, "timestamp": 1}
        for _ in range(50)
    ]
    produced = run_script(node, "produce.js", {**common, "codec": "none", "records": records})
    assert len(produced["placed"]) == 50
    consumed = run_script(
        node,
        "consume.js",
        {**common, "groupId": "kjs", "expected": {"0": 50}, "seek": None, "timeoutMs": 30_000},
    )
    assert len(consumed["records"]) == 50


def moldau(*arguments: str, input_bytes: bytes | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "moldau", *arguments],
        input=input_bytes, capture_output=True, check=True, timeout=DEADLINE_S,
    )  # fmt: skip
    return done.stdout.decode()


def moldau_settings(mechanism: str, user: tuple[str, str], certificates: Certificates) -> list[str]:
    settings = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": certificates.path("ca.pem"),
        "sasl.mechanism": mechanism,
        "sasl.username": user[0],
        "sasl.password": user[1],
    }
    return [arg for name, value in settings.items() for arg in ("-X", f"{name}={value}")]


def test_the_moldau_cli_produces_and_consumes_with_scram_and_a_jaas_config(
    secure: str, certificates: Certificates
) -> None:
    settings = moldau_settings("SCRAM-SHA-512", ALICE, certificates)
    topic = create_topic(secure, rdkafka("SCRAM-SHA-512", ALICE, certificates), partitions=1)
    moldau("produce", topic, "-b", secure, *settings, input_bytes=b"one\ntwo\n")
    jaas = [
        "-X", "security.protocol=sasl_ssl",
        "-X", f"ssl.ca.location={certificates.path('ca.pem')}",
        "-X", "sasl.mechanism=PLAIN",
        "-X", f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="admin-secret";',
    ]  # fmt: skip
    read = moldau(
        "consume", topic, "-b", secure, *jaas, "-o", "beginning", "-e", "--format", "text"
    )
    assert read.split() == ["one", "two"]


def authentication_errors(bootstrap: str, settings: dict[str, Any]) -> list[KafkaError]:
    """The errors a producer reports when it cannot log in (it keeps trying meanwhile)."""
    errors: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "error_cb": errors.append,
         "reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 1000, **settings}
    )  # fmt: skip
    poll_until(lambda: producer.poll(0.2) is not None and errors, "the client's error callback")
    return errors


@pytest.mark.parametrize(
    ("mechanism", "user", "client_says", "broker_says"),
    [
        ("PLAIN", ("admin", "wrong"), "Invalid username or password",
         r"\(PLAIN\): Authentication failed: Invalid username or password"),
        ("PLAIN", ("mallory", "x"), "Invalid username or password",
         r"\(PLAIN\): Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-512", ("alice", "wrong"),
         "invalid credentials with SASL mechanism SCRAM-SHA-512",
         r"\(SCRAM-SHA-512\): Invalid client credentials \(e=invalid-proof\)"),
        ("SCRAM-SHA-512", ("mallory", "x"),
         "invalid credentials with SASL mechanism SCRAM-SHA-512",
         r"\(SCRAM-SHA-512\): .*\(e=unknown-user\)"),
        ("SCRAM-SHA-256", ALICE, "SCRAM-SHA-256",
         r"\(no mechanism\): Unsupported SASL mechanism SCRAM-SHA-256"),
    ],
)  # fmt: skip
def test_a_refused_login_fails_cleanly_and_others_are_served(
    sasl_server: MoldauServer,
    clear: str,
    mechanism: str,
    user: tuple[str, str],
    client_says: str,
    broker_says: str,
) -> None:
    before = len(log_lines(sasl_server, "failed authentication"))
    errors = authentication_errors(clear, rdkafka(mechanism, user))
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert any(client_says in error.str() for error in errors), [e.str() for e in errors]
    lines = poll_until(
        lambda: log_lines(sasl_server, "failed authentication")[before:], "the broker's line"
    )
    assert re.search(broker_says, lines[0]), lines
    assert "Traceback" not in sasl_server.output_tail(2000)
    good = AdminClient({"bootstrap.servers": clear, **rdkafka("SCRAM-SHA-512", ALICE)})
    assert good.list_topics(timeout=10).brokers


def logs_in(bootstrap: str, settings: dict[str, Any]) -> bool:
    """A new client with these settings is served metadata (a failed login: False)."""
    try:
        client = AdminClient({"bootstrap.servers": bootstrap, **settings})
        return bool(client.list_topics(timeout=2).brokers)
    except Exception:
        return False


def test_a_user_added_by_alter_user_scram_credentials_logs_in_and_once_deleted_cannot(
    sasl_server: MoldauServer, secure: str, certificates: Certificates
) -> None:
    admin = moldau_settings("SCRAM-SHA-512", ALICE, certificates)
    name = f"dave-{uuid.uuid4().hex[:4]}"
    moldau("user", "set", name, "SCRAM-SHA-512=[password=dave-secret]", "-b", secure, *admin)
    described = moldau("user", "describe", name, "-b", secure, *admin, "--format", "json")
    assert '"iterations": 8192' in described and "SCRAM-SHA-512" in described
    dave = rdkafka("SCRAM-SHA-512", (name, "dave-secret"), certificates)

    poll_until(lambda: logs_in(secure, dave), "the new user logs in")
    moldau("user", "delete", name, "SCRAM-SHA-512", "-b", secure, *admin)
    errors = authentication_errors(secure, dave)
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert "unknown-user" in log_lines(sasl_server, "failed authentication")[-1]
    everyone = moldau("user", "describe", "-b", secure, *admin, "--format", "json")
    assert "alice" in everyone and name not in everyone


def refused_cli(*arguments: str) -> tuple[int, str]:
    """A `moldau` command expected to fail: its exit code and its one line on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "moldau", *arguments],
        capture_output=True, check=False, timeout=DEADLINE_S,
    )  # fmt: skip
    stderr = done.stderr.decode()
    assert stderr.count("\n") == 1, stderr
    return done.returncode, stderr


def test_the_cli_reports_a_failed_login_as_such(
    secure: str, clear: str, certificates: Certificates
) -> None:
    """Exit code 5 and a line saying what to check, never "is the server running"."""
    wrong = moldau_settings("SCRAM-SHA-512", ("alice", "wrong"), certificates)
    assert refused_cli("topic", "list", "-b", secure, *wrong) == (
        5,
        f"error: authentication failed: {secure}: Authentication failed during authentication "
        "due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
        "(SASL_AUTHENTICATION_FAILED); check -X sasl.username, -X sasl.password and "
        "-X sasl.mechanism\n",
    )
    not_enabled = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": ALICE[0],
        "sasl.password": ALICE[1],
    }
    arguments = [a for name, value in not_enabled.items() for a in ("-X", f"{name}={value}")]
    assert refused_cli("topic", "list", "-b", clear, *arguments) == (
        5,
        f"error: authentication failed: {clear} does not enable SASL mechanism SCRAM-SHA-256 "
        "(it enables PLAIN, SCRAM-SHA-512) (UNSUPPORTED_SASL_MECHANISM); set -X sasl.mechanism "
        "to one the listener enables\n",
    )


def test_the_cli_tells_a_user_deleted_that_the_login_failed(
    secure: str, certificates: Certificates
) -> None:
    admin = moldau_settings("SCRAM-SHA-512", ALICE, certificates)
    name = f"erin-{uuid.uuid4().hex[:4]}"
    moldau("user", "set", name, "SCRAM-SHA-512=[password=erin-secret]", "-b", secure, *admin)
    erin = moldau_settings("SCRAM-SHA-512", (name, "erin-secret"), certificates)
    poll_until(lambda: logs_in(secure, rdkafka("SCRAM-SHA-512", (name, "erin-secret"), certificates)), "the new user logs in")  # fmt: skip
    moldau("topic", "list", "-b", secure, *erin)
    moldau("user", "delete", name, "SCRAM-SHA-512", "-b", secure, *admin)
    code, line = refused_cli("topic", "list", "-b", secure, *erin)
    assert code == 5 and line.startswith("error: authentication failed: "), line
    assert "(SASL_AUTHENTICATION_FAILED)" in line and "server running" not in line


def test_a_tls_client_without_sasl_settings_is_told_the_listener_expects_sasl(
    secure: str, certificates: Certificates
) -> None:
    tls_only = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certificates.path('ca.pem')}"]  # fmt: skip
    assert refused_cli("topic", "list", "-b", secure, *tls_only) == (
        5,
        f"error: authentication failed: {secure} is a SASL listener (mechanisms PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512) and closed the connection of a client without SASL "
        "settings (ILLEGAL_SASL_STATE); give -X security.protocol=SASL_SSL (or SASL_PLAINTEXT), "
        "-X sasl.mechanism, -X sasl.username and -X sasl.password\n",
    )
