"""A node's place in its cluster: roles, voters and listeners, checked before anything starts."""

from __future__ import annotations

import pytest

from moldau.config.authorization import STANDARD_AUTHORIZER
from moldau.config.cluster import ClusterLayout, Voter, check_properties, inert_properties
from moldau.config.values import BrokerConfig, ConfigError

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"


def _layout(**properties: str) -> ClusterLayout:
    return ClusterLayout.from_config(BrokerConfig(properties))


def test_the_zero_configuration_node_is_a_standalone_combined_node() -> None:
    layout = _layout()
    assert layout.is_broker and layout.is_controller and layout.standalone
    assert layout.voter_ids == (1,)
    assert layout.inter_broker_listener_name == "PLAINTEXT"


def test_a_node_named_the_only_voter_runs_a_quorum_others_may_join() -> None:
    layout = _layout(
        **{
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
        }
    )
    assert layout.is_voter and not layout.standalone


def test_a_combined_voter_of_three_listens_for_clients_and_controllers() -> None:
    layout = _layout(
        **{
            "node.id": "2",
            "controller.quorum.voters": VOTERS,
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094",
            "broker.rack": "rack-b",
        }
    )
    assert not layout.standalone and layout.is_voter
    assert [listener.port for listener in layout.controller_listeners] == [9094]
    assert [listener.name for listener in layout.client_listeners] == ["PLAINTEXT"]
    assert layout.voters[1] == Voter(node_id=2, host="127.0.0.1", port=9094)
    assert layout.rack == "rack-b"


def test_a_controller_with_bootstrap_servers_has_dynamic_voters() -> None:
    layout = _layout(
        **{
            "node.id": "4",
            "controller.quorum.bootstrap.servers": "127.0.0.1:9093,[::1]:9094",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9096",
        }
    )
    assert layout.dynamic and not layout.standalone and not layout.is_voter
    assert layout.voter_ids == ()
    assert [str(s) for s in layout.bootstrap_servers] == ["127.0.0.1:9093", "::1:9094"]
    broker = _layout(
        **{
            "node.id": "5",
            "process.roles": "broker",
            "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
        }
    )
    assert broker.dynamic and not broker.is_controller


def test_a_broker_only_node_is_an_observer() -> None:
    layout = _layout(
        **{"node.id": "4", "process.roles": "broker", "controller.quorum.voters": VOTERS}
    )
    assert layout.is_broker and not layout.is_controller and not layout.is_voter


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"process.roles": "broker,leader"}, "process.roles must be"),
        (
            {"node.id": "7", "controller.quorum.voters": VOTERS},
            "not one of controller.quorum.voters",
        ),
        (
            {"node.id": "1", "controller.quorum.voters": VOTERS},
            "needs a listener named in controller.listener.names",
        ),
        (
            {"node.id": "1", "process.roles": "broker", "controller.quorum.voters": VOTERS},
            "has no controller role",
        ),
        (
            {
                "node.id": "5",
                "process.roles": "broker",
                "controller.quorum.voters": VOTERS,
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            },
            "must not listen on a controller listener",
        ),
        ({"node.id": "5", "process.roles": "broker"}, "needs controller.quorum.voters"),
        (
            {
                "node.id": "1",
                "controller.quorum.voters": VOTERS,
                "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            },
            "are both set",
        ),
        ({"controller.quorum.bootstrap.servers": "1@host:9093"}, "must look like host:port"),
        ({"controller.quorum.bootstrap.servers": "host"}, "must look like host:port"),
        (
            {"node.id": "4", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"},
            "needs a listener named in controller.listener.names",
        ),
        ({"controller.quorum.voters": "1@host"}, "must look like id@host:port"),
        ({"controller.quorum.voters": "1@a:1,1@b:2"}, "names a node twice"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "names a listener twice"),
        ({"listeners": "SECRET://:9092"}, "has no security protocol"),
        (
            {
                "listeners": "PLAINTEXT://:9092,SSL://:9093",
                "inter.broker.listener.name": "SSL",
                "security.inter.broker.protocol": "SSL",
            },
            "both set",
        ),
        ({"security.inter.broker.protocol": "SSL"}, "names no listener of that name"),
        ({"inter.broker.listener.name": "INTERNAL"}, "is not one of the listeners"),
    ],
)
def test_misconfiguration_stops_the_node_with_one_clear_line(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _layout(**properties)
    assert "\n" not in str(caught.value)


def test_unknown_properties_are_reported_with_the_closest_known_name() -> None:
    warnings = check_properties(BrokerConfig({"log.retension.ms": "5", "colour": "blue"}))
    assert warnings == [
        "unknown configuration colour is ignored",
        "unknown configuration log.retension.ms is ignored (did you mean log.retention.ms?)",
    ]


def test_kafka_keys_moldau_does_not_act_on_are_not_unknown() -> None:
    config = BrokerConfig(
        {
            "sasl.kerberos.min.time.before.relogin": "30000",
            "sasl.kerberos.service.name": "kafka",
            "num.network.threads": "8",
            "num.io.threads": "8",
            "group.share.max.groups": "20",
            "log.cleaner.threads": "2",
        }
    )
    assert check_properties(config) == []
    misspelt = BrokerConfig(
        {"num.netwrok.threads": "8", "sasl.kerberos.min.time.before.relogin": "1"}
    )
    assert check_properties(misspelt) == [
        "unknown configuration num.netwrok.threads is ignored (did you mean num.network.threads?)"
    ]


def test_kafka_keys_set_to_no_effect_are_listed_with_the_reason() -> None:
    notes = inert_properties(
        BrokerConfig(
            {
                "num.network.threads": "8",
                "num.io.threads": "8",  # Kafka's default: nothing to say
                "remote.log.storage.system.enable": "true",
                "log.retention.ms": "5",
            }
        )
    )
    assert [note.split(" has no effect in Moldau: ")[0] for note in notes] == [
        "num.network.threads=8",
        "remote.log.storage.system.enable=true",
    ]
    assert "event loop" in notes[0] and "tiered storage" in notes[1]


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"authorizer.class.name": "x"}, "is not an authorizer Moldau has"),
        ({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "admin"}, "Type:name"),
        ({"principal.builder.class": "x"}, "has only its own"),
        ({"sasl.jaas.config": "x"}, "per listener and mechanism"),
        ({"sasl.server.callback.handler.class": "x"}, "not a SASL setting Moldau can act on"),
        ({"sasl.login.class": "x"}, "not a SASL setting Moldau can act on"),
        ({"sasl.oauthbearer.token.endpoint.url": "x"}, "not a SASL setting Moldau can act on"),
        ({"sasl.server.max.receive.size": "1024"}, "not a SASL setting Moldau can act on"),
        ({"create.topic.policy.class.name": "x"}, "has only its own"),
        ({"client.quota.callback.class": "x"}, "has only its own"),
        ({"listener.name.plaintext.gssapi.sasl.jaas.config": "x"}, "does not support"),
        (
            {"listener.name.plaintext.plain.sasl.server.callback.handler.class": "x"},
            "no custom callback handlers",
        ),
        (
            {"listener.name.plaintext.oauthbearer.sasl.server.callback.handler.class": "a.B"},
            "not a callback handler Moldau has",
        ),
        (
            {"listener.name.plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "x"},
            "Not a number",
        ),
        ({"listener.name.plaintext.sasl.kerberos.service.name": "x"}, "reads only ssl.*"),
        ({"listener.name.other.plain.sasl.jaas.config": "x"}, "neither in listeners"),
    ],
)
def test_security_settings_moldau_cannot_honour_stop_the_node(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_properties(BrokerConfig(properties))


def test_sasl_listeners_are_accepted() -> None:
    layout = _layout(
        **{
            "listeners": "SASL_SSL://:9093,INTERNAL://:9094",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
        }
    )
    assert layout.security_protocols["INTERNAL"] == "SASL_PLAINTEXT"


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ssl.keymanager.algorithm": "SunX509"}, "not a TLS setting Moldau can act on"),
        ({"ssl.allow.dn.changes": "true"}, "not a TLS setting Moldau can act on"),
        ({"ssl.engine.factory.class": "x"}, "has only its own"),
        ({"listener.name.other.ssl.keystore.type": "PEM"}, "neither in listeners"),
        ({"listener.name.plaintext.ssl.client.auth": "sometimes"}, "must be one of"),
        ({"listener.name.plaintext.ssl.provider": "SUN"}, "not a TLS setting"),
    ],
)
def test_tls_settings_moldau_cannot_act_on_stop_the_node(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_properties(BrokerConfig(properties))


def test_tls_settings_per_listener_are_accepted_for_listeners_and_controller_listeners() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093",
            "ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.controller.ssl.truststore.type": "PEM",
        }
    )
    assert check_properties(config) == []


def test_security_inter_broker_protocol_names_the_inter_broker_listener() -> None:
    layout = _layout(
        listeners="PLAINTEXT://:9092,SSL://:9093", **{"security.inter.broker.protocol": "SSL"}
    )
    assert layout.inter_broker_listener_name == "SSL"
