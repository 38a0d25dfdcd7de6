"""TLS settings from Kafka's ssl.* properties: every form loads, every mistake is one line."""

from __future__ import annotations

import ssl

import pytest

from moldau.config.tls import client_context, server_context, tls_settings
from moldau.config.values import BrokerConfig, ConfigError
from tests.certificates import KEY_PASSWORD, Certificates, make_certificates


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _server(properties: dict[str, str], listener: str = "SSL") -> ssl.SSLContext:
    settings = tls_settings(BrokerConfig(properties), listener)
    return server_context(settings, listener_name=listener)


def test_a_pem_keystore_file_and_truststore_file_load(certificates: Certificates) -> None:
    context = _server(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
            "ssl.client.auth": "required",
        }
    )
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] == 1


def test_inline_pem_and_an_encrypted_key_load(certificates: Certificates) -> None:
    context = _server(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": certificates.text("server.crt"),
            "ssl.keystore.key": certificates.text("server-encrypted.key"),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certificates.text("ca.pem"),
            "ssl.client.auth": "requested",
        }
    )
    assert context.verify_mode == ssl.CERT_OPTIONAL


def test_a_pkcs12_keystore_loads(certificates: Certificates) -> None:
    _server(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": certificates.path("server.p12"),
            "ssl.keystore.password": KEY_PASSWORD,
        }
    )


def test_listener_prefixed_settings_win_over_plain_ones(certificates: Certificates) -> None:
    properties = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates.path("server.pem"),
        "ssl.client.auth": "none",
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.INTERNAL.ssl.protocol": "TLSv1.2",
    }
    internal = _server(properties, "INTERNAL")
    assert internal.verify_mode == ssl.CERT_REQUIRED
    assert internal.maximum_version == ssl.TLSVersion.TLSv1_2
    assert _server(properties, "SSL").verify_mode == ssl.CERT_NONE


def test_endpoint_identification_decides_the_inter_node_hostname_check(
    certificates: Certificates,
) -> None:
    config = BrokerConfig(
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.path("ca.pem")}
    )
    assert client_context(tls_settings(config, "SSL"), listener_name="SSL").check_hostname
    config = BrokerConfig(
        {
            "ssl.endpoint.identification.algorithm": "",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.path("ca.pem"),
        }
    )
    context = client_context(tls_settings(config, "SSL"), listener_name="SSL")
    assert not context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "has no key"),
        ({"ssl.keystore.location": "{server.pem}"}, "JKS"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/key.pem"},
            "cannot read ssl.keystore.location",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "{server-encrypted.pem}"},
            "encrypted: set ssl.key.password",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server-encrypted.pem}",
                "ssl.key.password": "wrong",
            },
            "does not load.*ssl.key.password",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ca.pem}"},
            "holds no PEM private key",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.keystore.password": "x",
            },
            "cannot be set with PEM",
        ),
        (
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "{server.p12}",
                "ssl.keystore.password": "wrong",
            },
            "wrong ssl.keystore.password",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "{{server.crt}}"},
            "ssl.keystore.key is missing",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.enabled.protocols": "TLSv1.1",
            },
            "TLSv1.2 and TLSv1.3 only",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            },
            "cannot narrow the TLS 1.3",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.cipher.suites": "TLS_MADE_UP",
                "ssl.enabled.protocols": "TLSv1.2",
            },
            "does not know",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "{server.key}",
            },
            "no PEM certificate",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "{server.pem}",
                "ssl.endpoint.identification.algorithm": "dns",
            },
            "use https",
        ),
    ],
)
def test_a_listener_that_cannot_set_up_tls_is_refused_in_one_line(
    certificates: Certificates, properties: dict[str, str], message: str
) -> None:
    def fill(value: str) -> str:
        if value.startswith("{{"):
            return certificates.text(value.strip("{}"))
        if value.startswith("{"):
            return certificates.path(value.strip("{}"))
        return value

    with pytest.raises(ConfigError, match=message) as caught:
        _server({name: fill(value) for name, value in properties.items()})
    assert "\n" not in str(caught.value) and "listener SSL" in str(caught.value)


def test_suites_narrow_tls_1_2(certificates: Certificates) -> None:
    context = _server(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.path("server.pem"),
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        }
    )
    assert [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES256-GCM-SHA384"
    ]
