"""SASL/OAUTHBEARER against a real `moldau server`, driven by confluent-kafka (librdkafka), the
`moldau` CLI and raw requests.

One server, three OAUTHBEARER listeners: DEV with Kafka's default unsecured validator (scope
`kafka` required), SIGNED with KIP-768's validator over a JWKS file (audience `kafka`, the
test provider's issuer) and FETCHED with the same validator over a JWKS served by an HTTPS
server this module starts on loopback (trusted through the JAAS truststore options). Clients
log in with librdkafka's unsecured token or an `oauth_cb` returning a signed JWT; a wrong
signature, an expired token, a wrong audience and a missing scope each fail with the client's
authentication error and one broker line while the broker serves the others; the session ends
with the token (KIP-368); keys the provider rotates in are fetched when a token names one.
"""

from __future__ import annotations

import http.server
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from moldau.config.sasl import SaslCredentials
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.oauthbearer import ACKNOWLEDGE_ERROR, initial_response, unsecured_token
from tests.certificates import Certificates, make_certificates
from tests.jwt_tokens import IdentityProvider, new_key, sign

from .conftest import MoldauServer, ServerFactory
from .test_sasl_listeners import authentication_errors, logs_in, round_trip
from .test_sasl_wire import metadata_requests_for
from .test_tls_listeners import listener_port, log_lines, poll_until
from .wire import Connection

DEADLINE_S = 30.0
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
AUDIENCE = "kafka"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def provider() -> IdentityProvider:
    provider = IdentityProvider.with_keys("rsa-1")
    provider.add("ec-1", "ES256")
    return provider


@pytest.fixture(scope="module")
def jwks_url(provider: IdentityProvider, certificates: Certificates) -> Iterator[str]:
    """The provider's current JWKS over HTTPS on loopback (what it publishes changes with it)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = provider.jwks().encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.path("server.crt"), certificates.path("server.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/jwks"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def oauth_server(
    module_server_factory: ServerFactory,
    provider: IdentityProvider,
    certificates: Certificates,
    jwks_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> MoldauServer:
    jwks_file = tmp_path_factory.mktemp("jwks") / "jwks.json"
    jwks_file.write_text(provider.jwks())
    trusted = f'ssl.truststore.type="PEM" ssl.truststore.location="{certificates.path("ca.pem")}"'
    server = module_server_factory(
        listeners="PLAINTEXT://127.0.0.1:0,DEV://127.0.0.1:0,SIGNED://127.0.0.1:0,"
        "FETCHED://127.0.0.1:0",
        num_partitions="1",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,DEV:SASL_PLAINTEXT,"
            "SIGNED:SASL_PLAINTEXT,FETCHED:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.dev.oauthbearer.sasl.jaas.config": (
                f'{MODULE} required unsecuredValidatorRequiredScope="kafka";'
            ),
            "listener.name.signed.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
            "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (
                jwks_file.as_uri()
            ),
            "listener.name.fetched.oauthbearer.sasl.jaas.config": f"{MODULE} required {trusted};",
            "listener.name.fetched.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.fetched.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": provider.issuer,
        },
    )
    poll_until(lambda: log_lines(server, rf"JWKS {re.escape(jwks_url)}.*: 2 keys"), "the fetch")
    return server


def bootstrap(server: MoldauServer, listener: str) -> str:
    return f"127.0.0.1:{listener_port(server, listener)}"


def unsecured(principal: str, scope: str | None = "kafka") -> dict[str, Any]:
    """librdkafka's own unsecured token (development)."""
    config = f"principal={principal}" + (f" scope={scope}" if scope else "")
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": config,
    }


def signed_by(token: Callable[[], str]) -> dict[str, Any]:
    """confluent-kafka's oauth_cb, returning a token from the identity provider."""

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token(), time.time() + 3600

    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb}  # fmt: skip


def test_librdkafkas_unsecured_token_produces_and_consumes(oauth_server: MoldauServer) -> None:
    round_trip(bootstrap(oauth_server, "DEV"), unsecured("alice"))


def test_a_signed_token_from_oauth_cb_produces_and_consumes(
    oauth_server: MoldauServer, provider: IdentityProvider
) -> None:
    settings = signed_by(lambda: provider.token("rsa-1", sub="alice", aud=AUDIENCE))
    round_trip(bootstrap(oauth_server, "SIGNED"), settings, count=50)


@pytest.mark.parametrize(
    ("listener", "kind", "client_says", "broker_says"),
    [
        ("SIGNED", "stranger", "invalid_token", r"signature does not verify \(kid 'rsa-1'\)"),
        ("SIGNED", "expired", "invalid_token", r"the token expired"),
        ("SIGNED", "audience", "invalid_token", r"audience 'billing' is none of the expected"),
        ("DEV", "no scope", "insufficient_scope", r"lacks the required scope 'kafka'"),
    ],
)
def test_a_refused_token_fails_cleanly_and_others_are_served(
    oauth_server: MoldauServer,
    provider: IdentityProvider,
    listener: str,
    kind: str,
    client_says: str,
    broker_says: str,
) -> None:
    claims = {"sub": "mallory", "iss": provider.issuer, "aud": AUDIENCE,
              "iat": int(time.time()) - 7200, "exp": int(time.time()) + 3600}  # fmt: skip
    tokens = {
        "stranger": lambda: sign(claims, new_key(), kid="rsa-1"),
        "expired": lambda: provider.token("rsa-1", sub="mallory", aud=AUDIENCE, lifetime_s=-60),
        "audience": lambda: provider.token("rsa-1", sub="mallory", aud="billing"),
    }
    settings = signed_by(tokens[kind]) if kind in tokens else unsecured("mallory", scope=None)
    before = len(log_lines(oauth_server, "failed authentication"))
    errors = authentication_errors(bootstrap(oauth_server, listener), settings)
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert any(client_says in error.str() for error in errors), [e.str() for e in errors]
    lines = poll_until(
        lambda: log_lines(oauth_server, "failed authentication")[before:], "the broker's line"
    )
    assert f"on {listener} (OAUTHBEARER)" in lines[0] and re.search(broker_says, lines[0]), lines
    assert "Traceback" not in oauth_server.output_tail(2000)
    good = AdminClient({"bootstrap.servers": bootstrap(oauth_server, "DEV"), **unsecured("bob")})
    assert good.list_topics(timeout=10).brokers


def test_keys_come_over_https_and_a_rotated_key_is_fetched_when_a_token_names_it(
    oauth_server: MoldauServer, provider: IdentityProvider
) -> None:
    address = bootstrap(oauth_server, "FETCHED")
    fetched = signed_by(lambda: provider.token("ec-1", sub="alice", aud=AUDIENCE))  # ES256
    assert AdminClient({"bootstrap.servers": address, **fetched}).list_topics(timeout=10).brokers
    provider.add("rsa-2")  # the provider rotates in a key the broker has not seen
    rotated = signed_by(lambda: provider.token("rsa-2", sub="alice", aud=AUDIENCE))

    poll_until(lambda: logs_in(address, rotated), "a token signed by the rotated key logs in")
    assert log_lines(oauth_server, r"no key 'rsa-2', fetching the key set again")
    assert log_lines(oauth_server, r"JWKS https://.*: 3 keys")


def authenticate(connection: Connection, token: str) -> Any:
    handshake = connection.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
    assert handshake.error_code == ErrorCode.none
    return connection.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": initial_response(token)})


def dev_token(sub: str, lifetime_s: float) -> str:
    return unsecured_token({"sub": sub, "scope": ["kafka"], "exp": time.time() + lifetime_s})


def metadata(connection: Connection) -> Any:
    return connection.request(
        ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}
    )


def test_the_session_ends_with_the_token_unless_renewed_kip_368(oauth_server: MoldauServer) -> None:
    port = listener_port(oauth_server, "DEV")
    with (
        Connection("127.0.0.1", port, timeout=5) as expiring,
        Connection("127.0.0.1", port, timeout=5) as renewed,
    ):
        answer = authenticate(expiring, dev_token("alice", 1.5))
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        assert answer.error_code == ErrorCode.none and 1000 < lifetime_ms <= 1500
        assert authenticate(renewed, dev_token("alice", 1.5)).error_code == ErrorCode.none
        assert metadata(expiring).brokers
        again = authenticate(renewed, dev_token("alice", 3600))  # re-authenticated in time
        assert again.session_lifetime.total_seconds() > 3500
        time.sleep(1.6)
        with pytest.raises(ConnectionError):
            metadata(expiring)
        assert metadata(renewed).brokers
        refused = authenticate(renewed, dev_token("mallory", 3600))
        assert "Cannot change principals" in refused.error_message


def test_a_refused_token_is_the_json_error_then_kafkas_failure_on_the_wire(
    oauth_server: MoldauServer,
) -> None:
    with Connection("127.0.0.1", listener_port(oauth_server, "SIGNED"), timeout=5) as connection:
        challenge = authenticate(connection, dev_token("alice", 60))  # unsigned: refused
        assert challenge.error_code == ErrorCode.none
        assert challenge.auth_bytes == b'{"status":"invalid_token"}'
        failed = connection.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": ACKNOWLEDGE_ERROR})
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert failed.error_message == '{"status":"invalid_token"}'


def moldau(*arguments: str, input_bytes: bytes | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "moldau", *arguments],
        input=input_bytes, capture_output=True, check=True, timeout=DEADLINE_S,
    )  # fmt: skip
    return done.stdout.decode()


def test_the_moldau_cli_produces_and_consumes_with_an_unsecured_token(
    oauth_server: MoldauServer,
) -> None:
    address = bootstrap(oauth_server, "DEV")
    settings = [arg for name, value in unsecured("alice").items()
                for arg in ("-X", f"{name}={value}")]  # fmt: skip
    topic = f"oauth-{time.monotonic_ns() % 10**8}"
    moldau("topic", "create", topic, "-b", address, *settings)
    moldau("produce", topic, "-b", address, *settings, input_bytes=b"one\ntwo\n")
    read = moldau("consume", topic, "-b", address, *settings, "-o", "beginning", "-e",
                  "--format", "text")  # fmt: skip
    assert read.split() == ["one", "two"]


def test_moldau_client_connections_renew_their_token_before_the_session_ends(
    oauth_server: MoldauServer, provider: IdentityProvider
) -> None:
    issued: list[str] = []

    def token() -> tuple[str, dict[str, str]]:
        issued.append(provider.token("ec-1", sub="alice", aud=AUDIENCE, lifetime_s=2))
        return issued[-1], {}

    before = len(log_lines(oauth_server, "session expired"))
    alice = SaslCredentials("OAUTHBEARER", "alice", "", token)
    assert metadata_requests_for(listener_port(oauth_server, "SIGNED"), alice, 4.5) > 20
    assert len(issued) >= 3  # (re-authenticated with a fresh token at 85 % of each)
    assert len(log_lines(oauth_server, "session expired")) == before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:///nowhere/jwks.json"},
         "no listener validates OAUTHBEARER tokens with"),
        ({"listener.name.auth.oauthbearer.sasl.server.callback.handler.class": "com.example.X"},
         "is not a callback handler Moldau has"),
        ({"listener.name.auth.oauthbearer.sasl.jaas.config": f"{MODULE} required x=;"},
         "Value not specified for key 'x'"),
        ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "no token of their own"),
    ],
)  # fmt: skip
def test_an_oauthbearer_misconfiguration_stops_the_node_with_one_error_line(
    start_server: ServerFactory, overrides: dict[str, str], message: str
) -> None:
    server = start_server(
        launch_only=True,
        **{
            "listeners": "AUTH://127.0.0.1:0",
            "listener.security.protocol.map": "AUTH:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.auth.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
            **overrides,
        },
    )
    assert server.wait_exited(DEADLINE_S) != 0
    errors = [line for line in server.output_tail(200).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], server.output_tail()
    assert "Traceback" not in server.output_tail(200)
