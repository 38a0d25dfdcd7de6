"""SASL settings read from Kafka's properties, and the refusals that stop a node."""

from __future__ import annotations

import pytest

from moldau.config.sasl import SaslCredentials, node_credentials, sasl_listener_settings
from moldau.config.values import BrokerConfig, ConfigError

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\\"b";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)


def test_a_listener_with_plain_and_scram() -> None:
    config = BrokerConfig(
        {
            "listener.name.clients.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.clients.plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": "60000",
        }
    )
    settings = sasl_listener_settings(config, "CLIENTS")
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(settings.plain_users) == {"admin": "admin-secret", "alice": 'a"b'}
    assert settings.reauthentication_ms == 60000 and settings.failure_delay_ms == 100


def test_the_node_takes_its_own_credentials_from_the_listeners_jaas_config() -> None:
    config = BrokerConfig(
        {
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        }
    )
    credentials = node_credentials(
        config, "INTERNAL", setting="sasl.mechanism.inter.broker.protocol"
    )
    assert credentials == SaslCredentials("SCRAM-SHA-512", "broker", "broker-secret")
    assert "broker-secret" not in repr(credentials)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "GSSAPI \\(Kafka's default\\)"),
        ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "oauthbearer.sasl.jaas.config is not set"),
        ({"sasl.enabled.mechanisms": "DIGEST-MD5"}, "unknown SASL mechanism"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config is not set"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.clients.plain.sasl.jaas.config": (
                    'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                    'password="b";'
                ),
            },
            "defines no user",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.clients.plain.sasl.jaas.config": SCRAM_JAAS,
            },
            "PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.clients.plain.sasl.jaas.config": "x required user_a=",
            },
            "Value not specified",
        ),
    ],
)
def test_listener_misconfigurations_say_what_to_set(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        sasl_listener_settings(BrokerConfig(properties), "CLIENTS")


def test_oauthbearer_between_nodes_is_refused_in_one_line() -> None:
    config = BrokerConfig({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="no token of their own"):
        node_credentials(config, "INTERNAL", setting="sasl.mechanism.inter.broker.protocol")


def test_scram_on_the_controller_listener_and_missing_credentials_are_refused() -> None:
    config = BrokerConfig({"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"})
    with pytest.raises(ConfigError, match="use PLAIN for the controller listener"):
        node_credentials(
            config, "CONTROLLER", setting="sasl.mechanism.controller.protocol", controller=True
        )
    config = BrokerConfig({"sasl.mechanism.controller.protocol": "PLAIN"})
    with pytest.raises(ConfigError, match=r"controller\.plain\.sasl\.jaas\.config"):
        node_credentials(
            config, "CONTROLLER", setting="sasl.mechanism.controller.protocol", controller=True
        )


@pytest.mark.parametrize(
    ("setting", "controller", "suggested"),
    [
        ("sasl.mechanism.inter.broker.protocol", False, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
        ("sasl.mechanism.controller.protocol", True, "PLAIN"),
    ],
)
def test_a_node_mechanism_left_at_gssapi_suggests_only_what_nodes_can_use(
    setting: str, controller: bool, suggested: str
) -> None:
    """Kafka's default GSSAPI is refused naming the mechanisms a node can authenticate with:
    never OAUTHBEARER, which is then refused too (nor SCRAM towards the controllers)."""
    with pytest.raises(ConfigError) as refused:
        node_credentials(BrokerConfig({}), "INTERNAL", setting=setting, controller=controller)
    assert str(refused.value) == (
        f"{setting} is GSSAPI (Kafka's default), which Moldau does not support; set it to "
        f"{suggested}"
    )
