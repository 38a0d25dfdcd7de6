"""OAUTHBEARER listener settings from Kafka's properties: the unsecured validator's JAAS options,
KIP-768's keys at each of their three prefixes, and the misconfigurations that stop a node."""

from __future__ import annotations

import pytest

from moldau.config.oauthbearer import (
    SIGNED_VALIDATOR,
    JwksValidatorSettings,
    UnsecuredValidatorSettings,
    check_validator_keys,
)
from moldau.config.sasl import sasl_listener_settings
from moldau.config.values import BrokerConfig, ConfigError
from tests.certificates import make_certificates

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "listener.name.clients.oauthbearer.sasl.server.callback.handler.class"
JAAS = "listener.name.clients.oauthbearer.sasl.jaas.config"


def settings(**properties: str):  # type: ignore[no-untyped-def]
    config = BrokerConfig({"sasl.enabled.mechanisms": "OAUTHBEARER", **properties})
    return sasl_listener_settings(config, "CLIENTS").oauthbearer


def test_the_unsecured_validator_is_the_default_with_kafkas_jaas_options() -> None:
    assert settings(**{JAAS: f"{MODULE} required;"}) == UnsecuredValidatorSettings()
    jaas = (
        f'{MODULE} required unsecuredLoginStringClaim_sub="admin" '
        'unsecuredValidatorPrincipalClaimName="azp" unsecuredValidatorScopeClaimName="roles" '
        'unsecuredValidatorRequiredScope="produce  consume" '
        'unsecuredValidatorAllowableClockSkewMs="3000";'
    )
    assert settings(**{JAAS: jaas}) == UnsecuredValidatorSettings(
        principal_claim="azp",
        scope_claim="roles",
        required_scope=("produce", "consume"),
        clock_skew_ms=3000,
    )


def test_the_signed_validator_reads_kip_768s_keys_most_specific_prefix_first() -> None:
    found = settings(
        **{
            JAAS: f"{MODULE} required;",
            HANDLER: SIGNED_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
            "listener.name.clients.sasl.oauthbearer.jwks.endpoint.url": "file:///etc/jwks.json",
            "listener.name.clients.oauthbearer.sasl.oauthbearer.expected.audience": "kafka,other",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
            "sasl.oauthbearer.sub.claim.name": "client_id",
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000",
        }
    )
    assert isinstance(found, JwksValidatorSettings)
    assert found.jwks_url == "file:///etc/jwks.json" and found.jwks_path == "/etc/jwks.json"
    assert found.expected_audience == ("kafka", "other")
    assert found.expected_issuer == "https://idp.example"
    assert (found.subject_claim, found.scope_claim) == ("client_id", "scope")
    assert (found.clock_skew_s, found.refresh_ms) == (5, 60000)


def test_an_https_jwks_is_trusted_through_the_jaas_truststore_options(tmp_path) -> None:  # type: ignore[no-untyped-def]
    certificates = make_certificates(tmp_path)
    jaas = (
        f'{MODULE} required ssl.truststore.type="PEM" '
        f'ssl.truststore.location="{certificates.path("ca.pem")}";'
    )
    found = settings(
        **{
            JAAS: jaas,
            HANDLER: SIGNED_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": "https://127.0.0.1:8443/jwks",
        }
    )
    assert isinstance(found, JwksValidatorSettings)
    assert found.trusted_pem is not None and b"BEGIN CERTIFICATE" in found.trusted_pem


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "oauthbearer.sasl.jaas.config is not set"),
        ({JAAS: "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
         "OAUTHBEARER needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"),
        ({JAAS: f"{MODULE} required unsecuredValidatorRequiredScopes=x;"},
         "not an option of Kafka's unsecured validator"),
        ({JAAS: f"{MODULE} required unsecuredValidatorAllowableClockSkewMs=-1;"},
         "must be a number of milliseconds"),
        ({JAAS: f"{MODULE} required;", HANDLER: "com.example.MyHandler"},
         "not a callback handler Moldau has"),
        ({JAAS: f"{MODULE} required;", HANDLER: SIGNED_VALIDATOR},
         "sasl.oauthbearer.jwks.endpoint.url is not set"),
        ({JAAS: f"{MODULE} required;", HANDLER: SIGNED_VALIDATOR,
          "sasl.oauthbearer.jwks.endpoint.url": "ldap://idp/keys"}, "https:, http: or file: URL"),
        ({JAAS: f'{MODULE} required ssl.truststore.location="/x.jks";', HANDLER: SIGNED_VALIDATOR,
          "sasl.oauthbearer.jwks.endpoint.url": "https://idp/keys"}, "JKS"),
        ({JAAS: f"{MODULE} required ssl.keystore.location=x;", HANDLER: SIGNED_VALIDATOR,
          "sasl.oauthbearer.jwks.endpoint.url": "https://idp/keys"}, "not read for the JWKS"),
    ],
)  # fmt: skip
def test_oauthbearer_misconfigurations_say_what_to_set(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(**properties)


def test_a_validator_key_for_a_listener_without_the_validator_is_refused() -> None:
    url = {"sasl.oauthbearer.jwks.endpoint.url": "https://idp/keys"}
    check_validator_keys(BrokerConfig(url), {"CLIENTS"})
    with pytest.raises(ConfigError, match="no listener validates OAUTHBEARER tokens with"):
        check_validator_keys(BrokerConfig(url), set())
    prefixed = {"listener.name.other.oauthbearer.sasl.oauthbearer.expected.issuer": "x"}
    with pytest.raises(ConfigError, match="but listener OTHER validates"):
        check_validator_keys(BrokerConfig(prefixed), {"CLIENTS"})
    check_validator_keys(BrokerConfig(prefixed), {"OTHER"})
