"""The client's OAUTHBEARER settings: librdkafka's unsecured token from sasl.oauthbearer.config,
confluent-kafka's oauth_cb, and the misuses refused before any connection."""

from __future__ import annotations

import pytest

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException
from moldau.client.sasl import sasl_credentials_of, unsecured_tokens
from moldau.protocol.sasl.jwt import decode_jws

OAUTH = {"security.protocol": "sasl_plaintext", "sasl.mechanism": "OAUTHBEARER"}


def test_librdkafkas_unsecured_token_carries_its_claims_and_extensions() -> None:
    principal, tokens = unsecured_tokens(
        "principalClaimName=azp principal=admin scopeClaimName=roles scope=a,b "
        "lifeSeconds=600 extension_traceId=123",
        clock=lambda: 1_700_000_000.5,
    )
    token, extensions = tokens()
    jws = decode_jws(token)
    assert principal == "admin" and extensions == {"traceId": "123"}
    assert jws.header == {"alg": "none"} and jws.signature == b""
    assert jws.claims == {"azp": "admin", "roles": ["a", "b"], "iat": 1_700_000_000.5,
                          "exp": 1_700_000_600.5}  # fmt: skip


def test_the_unsecured_token_must_be_enabled_as_librdkafka_requires() -> None:
    config = ClientConfig({**OAUTH, "sasl.oauthbearer.config": "principal=alice"})
    with pytest.raises(ConfigException, match=r"enable\.sasl\.oauthbearer\.unsecure\.jwt=true"):
        sasl_credentials_of(config)
    enabled = ClientConfig({**OAUTH, "sasl.oauthbearer.config": "principal=alice",
                            "enable.sasl.oauthbearer.unsecure.jwt": "true"})  # fmt: skip
    credentials = sasl_credentials_of(enabled)
    assert credentials is not None and credentials.token is not None
    assert decode_jws(credentials.token()[0]).claims["sub"] == "alice"


def test_oauth_cb_gives_the_token_in_confluent_kafkas_shapes() -> None:
    asked: list[str] = []

    def oauth_cb(config: str) -> tuple[str, float, str, dict[str, str]]:
        asked.append(config)
        return "header.claims.signature", 1e10, "alice", {"traceId": "7"}

    config = ClientConfig({**OAUTH, "oauth_cb": oauth_cb, "sasl.oauthbearer.config": "x=y"})
    credentials = sasl_credentials_of(config)
    assert credentials is not None and credentials.token is not None
    assert credentials.token() == ("header.claims.signature", {"traceId": "7"})
    assert asked == ["x=y"]
    short = ClientConfig({**OAUTH}, oauth_cb=lambda config: ("t", 1e10))
    credentials = sasl_credentials_of(short)
    assert credentials is not None and credentials.token is not None
    assert credentials.token() == ("t", {})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "needs a token"),
        ({"oauth_cb": print, "enable.sasl.oauthbearer.unsecure.jwt": True}, "mutually exclusive"),
        ({"oauth_cb": "token"}, "must be a callable"),
        ({"sasl.username": "alice"}, "authenticates with a token"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True}, "needs principal="),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True,
          "sasl.oauthbearer.config": "principal=a lifetime=5"}, "unknown name 'lifetime'"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True,
          "sasl.oauthbearer.config": "principal=a lifeSeconds=0"}, "lifeSeconds=0"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": True,
          "sasl.oauthbearer.config": "principal=a extension_auth=x"}, "cannot be sent"),
    ],
)  # fmt: skip
def test_oauthbearer_misuse_is_one_error(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        sasl_credentials_of(ClientConfig({**OAUTH, **settings}))


def test_the_java_clients_unsecured_login_options_make_the_same_kind_of_token() -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="|read|write" '
        'unsecuredLoginNumberClaim_level="3" unsecuredLoginLifetimeSeconds="60" '
        'unsecuredLoginExtension_traceId="7";'
    )
    credentials = sasl_credentials_of(ClientConfig({**OAUTH, "sasl.jaas.config": jaas}))
    assert credentials is not None and credentials.token is not None
    assert credentials.username == "alice"
    token, extensions = credentials.token()
    claims = decode_jws(token).claims
    assert extensions == {"traceId": "7"}
    assert claims["sub"] == "alice" and claims["scope"] == ["read", "write"]
    assert claims["level"] == 3 and claims["exp"] - claims["iat"] == 60


@pytest.mark.parametrize(
    ("jaas", "message"),
    [
        ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
         "unsecuredLoginStringClaim_sub"),
        ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
         'clientId="app" clientSecret="s";', "option 'clientId'"),
        ("org.apache.kafka.common.security.plain.PlainLoginModule required "
         'username="a" password="b";', "OAUTHBEARER needs"),
        ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
         'unsecuredLoginStringClaim_sub="a" unsecuredLoginNumberClaim_n="x";', "not a number"),
    ],
)  # fmt: skip
def test_bad_java_unsecured_login_options_are_one_error(jaas: str, message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        sasl_credentials_of(ClientConfig({**OAUTH, "sasl.jaas.config": jaas}))
