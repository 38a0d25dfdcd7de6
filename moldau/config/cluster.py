"""A node's place in its cluster, read from Kafka's KRaft properties and checked at start.

    process.roles                 broker | controller | broker,controller
    node.id                       this node
    controller.quorum.voters      id@host:port,... (the static voter set, KIP-595)
    controller.quorum.bootstrap.servers
                                  host:port,... of controllers, to find a quorum whose voters
                                  are in its log (dynamic voters, KIP-853), instead of voters
    controller.listener.names     which entries of `listeners` the controllers listen on
    inter.broker.listener.name    which listener brokers use to reach each other
    broker.rack                   this broker's rack

`ClusterLayout.from_config()` raises `ConfigError` with one line that says what is wrong and how
to fix it, as Kafka's KafkaConfig does, so a misconfigured node never starts half-working:

- voters and bootstrap servers are not both set;
- a controller must be one of the static voters (with bootstrap servers it may join later), and
  must listen on a controller listener;
- a broker-only node must not be a voter and must not listen on a controller listener;
- the inter-broker listener must be a listener of this node and not a controller listener;
- every listener name must be unique and have a security protocol.

With no voters configured, a combined node is a cluster of one whose controller runs in-process
(Moldau's zero-configuration start); it needs no controller listener.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from moldau.config.authorization import AuthorizerSettings
from moldau.config.definitions import BROKER_KEYS
from moldau.config.oauthbearer import (
    CALLBACK_HANDLER,
    MECHANISM_PREFIX,
    VALIDATOR_KEYS,
    check_callback_handler,
)
from moldau.config.share_groups import InvalidGroupConfig, ShareGroupConfig
from moldau.config.tls import LISTENER_PREFIX, listener_overrides
from moldau.config.values import BrokerConfig, ConfigError, parse_value

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
BROKER_ROLE = "broker"
CONTROLLER_ROLE = "controller"


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    """One entry of `listeners`: NAME://host:port (the net layer binds it)."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, setting: str = "listeners") -> ListenerAddress:
        if "://" not in text:
            raise ConfigError(f"{setting} entry {text!r} must look like NAME://host:port")
        name, rest = text.split("://", 1)
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not port.isdigit() or not name.strip():
            raise ConfigError(f"{setting} entry {text!r} must look like NAME://host:port")
        return cls(name=name.strip().upper(), host=host, port=int(port))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    """One entry of `controller.quorum.voters`: id@host:port."""

    node_id: int
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Voter:
        node_part, at, address = text.partition("@")
        host, _, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not at or not node_part.strip().isdigit() or not host or not port.isdigit():
            raise ConfigError(
                f"controller.quorum.voters entry {text!r} must look like id@host:port "
                "(for example 1@localhost:9093)"
            )
        return cls(node_id=int(node_part), host=host, port=int(port))

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BootstrapServer:
    """One entry of `controller.quorum.bootstrap.servers`: host:port."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> BootstrapServer:
        host, _, port = text.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or not port.isdigit() or "@" in host:
            raise ConfigError(
                f"controller.quorum.bootstrap.servers entry {text!r} must look like host:port "
                "(for example localhost:9093)"
            )
        return cls(host=host, port=int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLayout:
    node_id: int
    roles: frozenset[str]
    voters: tuple[Voter, ...]
    bootstrap_servers: tuple[BootstrapServer, ...] = ()
    listeners: tuple[ListenerAddress, ...]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str | None
    security_protocols: dict[str, str]
    rack: str | None

    @property
    def is_broker(self) -> bool:
        return BROKER_ROLE in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER_ROLE in self.roles

    @property
    def is_voter(self) -> bool:
        return any(voter.node_id == self.node_id for voter in self.voters)

    @property
    def dynamic(self) -> bool:
        """The voters are in the metadata log (KIP-853), found through bootstrap servers."""
        return bool(self.bootstrap_servers)

    @property
    def standalone(self) -> bool:
        """A cluster of one run in-process: neither voters nor bootstrap servers configured.
        A node named as the only voter in `controller.quorum.voters` is a quorum of one that
        other nodes may join (brokers, observers), so it runs the quorum as in any cluster."""
        return not self.dynamic and not self.voters

    @property
    def voter_ids(self) -> tuple[int, ...]:
        """The static voters (this node alone when none are configured); none with dynamic
        voters."""
        if self.dynamic:
            return ()
        return tuple(voter.node_id for voter in self.voters) or (self.node_id,)

    @property
    def controller_listeners(self) -> tuple[ListenerAddress, ...]:
        return tuple(
            listener
            for listener in self.listeners
            if listener.name in self.controller_listener_names
        )

    @property
    def client_listeners(self) -> tuple[ListenerAddress, ...]:
        return tuple(
            listener
            for listener in self.listeners
            if listener.name not in self.controller_listener_names
        )

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ClusterLayout:
        node_id = config.node_id
        if node_id < 0:
            raise ConfigError(f"node.id must be 0 or more, not {node_id}")
        roles = _roles(config.get("process.roles"))
        voters = _voters(config.get("controller.quorum.voters") or [])
        bootstrap_servers = tuple(
            BootstrapServer.parse(item.strip())
            for item in config.get("controller.quorum.bootstrap.servers") or []
            if item.strip()
        )
        protocols = _protocol_map(config.get("listener.security.protocol.map") or [])
        listeners = _listeners(config.get("listeners") or [], protocols)
        controller_names = tuple(
            name.strip().upper() for name in config.get("controller.listener.names") or []
        )
        layout = cls(
            node_id=node_id,
            roles=roles,
            voters=voters,
            bootstrap_servers=bootstrap_servers,
            listeners=listeners,
            controller_listener_names=controller_names,
            inter_broker_listener_name=_inter_broker_name(config, listeners, controller_names),
            security_protocols=protocols,
            rack=config.get("broker.rack"),
        )
        layout._check()
        return layout

    def _check(self) -> None:
        ids = [voter.node_id for voter in self.voters]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"controller.quorum.voters names a node twice: {ids}")
        if self.voters and self.bootstrap_servers:
            raise ConfigError(
                "controller.quorum.voters and controller.quorum.bootstrap.servers are both set; "
                "set voters for a static quorum or bootstrap.servers for dynamic voters, not both"
            )
        controller_listeners = self.controller_listeners
        if self.is_controller:
            if self.voters and not self.is_voter:
                raise ConfigError(
                    f"node.id={self.node_id} has the controller role but is not one of "
                    f"controller.quorum.voters ({', '.join(map(str, self.voters))}); "
                    "add it or remove controller from process.roles"
                )
            if not self.standalone and not controller_listeners:
                raise ConfigError(
                    "a controller needs a listener named in controller.listener.names "
                    f"({', '.join(self.controller_listener_names) or 'none'}) in listeners, "
                    "for example CONTROLLER://127.0.0.1:9093"
                )
        else:
            if self.is_voter:
                raise ConfigError(
                    f"node.id={self.node_id} is one of controller.quorum.voters but "
                    "process.roles has no controller role; give it the controller role or "
                    "remove it from the voters"
                )
            if controller_listeners:
                raise ConfigError(
                    "a broker-only node must not listen on a controller listener "
                    f"({controller_listeners[0].name}); remove it from listeners"
                )
            if not self.voters and not self.bootstrap_servers:
                raise ConfigError(
                    "a broker-only node needs controller.quorum.voters or "
                    "controller.quorum.bootstrap.servers to find the controllers"
                )
        if self.is_broker and not self.client_listeners:
            raise ConfigError(
                "a broker needs a listener that is not a controller listener in listeners, "
                "for example PLAINTEXT://127.0.0.1:9092"
            )
        for name in self.controller_listener_names:
            if name == self.inter_broker_listener_name:
                raise ConfigError(
                    f"the controller listener {name} cannot be inter.broker.listener.name"
                )


def _roles(raw: Any) -> frozenset[str]:
    items = [raw] if isinstance(raw, str) else list(raw or [])
    roles = frozenset(item.strip().lower() for item in items if item.strip())
    if not roles or not roles <= {BROKER_ROLE, CONTROLLER_ROLE}:
        raise ConfigError(
            f"process.roles must be broker, controller or broker,controller, not {raw!r}"
        )
    return roles


def _voters(items: list[str]) -> tuple[Voter, ...]:
    return tuple(Voter.parse(item.strip()) for item in items if item.strip())


def _protocol_map(items: list[str]) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for item in items:
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise ConfigError(
                f"listener.security.protocol.map entry {item!r} must look like NAME:PROTOCOL"
            )
        protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def _listeners(items: list[str], protocols: dict[str, str]) -> tuple[ListenerAddress, ...]:
    listeners = tuple(ListenerAddress.parse(item.strip()) for item in items if item.strip())
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listeners names a listener twice: {', '.join(names)}")
    for listener in listeners:
        if listener.name not in protocols:
            raise ConfigError(
                f"listener {listener.name} has no security protocol in "
                "listener.security.protocol.map"
            )
        protocol = protocols[listener.name]
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener {listener.name} has the unknown security protocol {protocol} "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
    return listeners


def _inter_broker_name(
    config: BrokerConfig, listeners: tuple[ListenerAddress, ...], controller_names: tuple[str, ...]
) -> str | None:
    configured = config.get("inter.broker.listener.name")
    by_protocol = config.is_set("security.inter.broker.protocol")
    if configured and by_protocol:
        raise ConfigError(
            "inter.broker.listener.name and security.inter.broker.protocol are both set; "
            "set only one (as Kafka requires)"
        )
    if by_protocol:
        # Kafka: the inter-broker listener is the one named after the protocol.
        configured = str(config.get("security.inter.broker.protocol")).upper()
        if all(listener.name in controller_names for listener in listeners):
            return None  # a controller-only node
        if configured not in {listener.name for listener in listeners}:
            raise ConfigError(
                f"security.inter.broker.protocol={configured} names no listener of that name "
                f"({', '.join(listener.name for listener in listeners)}); set "
                "inter.broker.listener.name instead"
            )
    if configured:
        name = str(configured).strip().upper()
        if name not in {listener.name for listener in listeners}:
            raise ConfigError(
                f"inter.broker.listener.name={name} is not one of the listeners "
                f"({', '.join(listener.name for listener in listeners)})"
            )
        return name
    for listener in listeners:
        if listener.name not in controller_names:
            return listener.name
    return None


# Properties Kafka has that Moldau refuses rather than ignore: a node configured for a principal
# builder, TLS engine, policy or quota plugin it lacks must not start without it. (Other `sasl.*`
# and `ssl.*` keys it does not act on are refused below; Kerberos keys are not, GSSAPI being
# refused where it would be used.)
_UNSUPPORTED = {
    "principal.builder.class",
    "ssl.engine.factory.class",
    "alter.config.policy.class.name",
    "create.topic.policy.class.name",
    "client.quota.callback.class",
}
_KERBEROS_PREFIX = "sasl.kerberos."
# The schema registry's own TLS settings: `schema.registry.ssl.*` over the node's `ssl.*` ones,
# with Confluent's `ssl.client.authentication` (NONE, REQUESTED, REQUIRED) for `ssl.client.auth`.
SCHEMA_REGISTRY_PREFIX = "schema.registry."
REGISTRY_SSL_PREFIX = SCHEMA_REGISTRY_PREFIX + "ssl."
CONFLUENT_CLIENT_AUTHENTICATION = "ssl.client.authentication"
_SASL_KEYS = (
    "sasl.enabled.mechanisms, sasl.mechanism.inter.broker.protocol, "
    "sasl.mechanism.controller.protocol, listener.name.<listener>.<mechanism>.sasl.jaas.config, "
    "listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class and the "
    "validator's sasl.oauthbearer.* keys"
)
_JAAS_MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer")


def _acted_on(name: str) -> bool:
    key = BROKER_KEYS.get(name)
    return key is not None and key.applies


def check_properties(config: BrokerConfig) -> list[str]:
    """Warnings for properties Moldau does not know (with the closest known name); raises
    ConfigError for security settings it cannot honour. Kafka's keys that have no effect in
    Moldau are not warned about here (`inert_properties` lists those set)."""
    for name in config.explicit_names():
        value = config.get(name) if name in BROKER_KEYS else config.raw_unknown(name)
        if value in (None, "", []):
            continue
        if name in _UNSUPPORTED:
            raise ConfigError(
                f"{name} is set, but Moldau has only its own (Kafka's default); remove it"
            )
        if name == "sasl.jaas.config":
            raise ConfigError(
                "sasl.jaas.config is set; a broker takes it per listener and mechanism, as "
                "Kafka's do: listener.name.<listener>.<mechanism>.sasl.jaas.config"
            )
        if (
            name.startswith("sasl.")
            and not name.startswith(_KERBEROS_PREFIX)
            and not _acted_on(name)
        ):
            raise ConfigError(
                f"{name} is not a SASL setting Moldau can act on (it reads {_SASL_KEYS}); remove it"
            )
        if name.startswith(REGISTRY_SSL_PREFIX):
            setting = name.removeprefix(SCHEMA_REGISTRY_PREFIX)
            if not _acted_on(setting) and setting != CONFLUENT_CLIENT_AUTHENTICATION:
                raise ConfigError(
                    f"{name} is not a TLS setting the schema registry can act on (it reads "
                    "schema.registry.ssl.<any ssl.* key a listener reads>); remove it"
                )
        if name.startswith("ssl.") and not _acted_on(name):
            raise ConfigError(
                f"{name} is not a TLS setting Moldau can act on (it reads ssl.keystore.*, "
                "ssl.truststore.*, ssl.key.password, ssl.client.auth, ssl.protocol, "
                "ssl.enabled.protocols, ssl.cipher.suites, "
                "ssl.endpoint.identification.algorithm, ssl.principal.mapping.rules); remove it"
            )
    _check_listener_overrides(config)
    AuthorizerSettings.of(config)
    try:
        ShareGroupConfig.from_properties(config)  # the group.share.* bounds, as Kafka checks them
    except InvalidGroupConfig as error:
        raise ConfigError(str(error)) from None
    warnings = []
    for name in config.unknown_names():
        if name.startswith((LISTENER_PREFIX, REGISTRY_SSL_PREFIX)):
            continue  # checked above
        close = difflib.get_close_matches(name, BROKER_KEYS, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"unknown configuration {name} is ignored{hint}")
    return warnings


def inert_properties(config: BrokerConfig) -> list[str]:
    """One line for each of Kafka's keys set to other than its default that has no effect in
    Moldau, saying why: it is accepted (a Kafka server.properties loads) but not silently."""
    notes = []
    for name in config.explicit_names():
        key = BROKER_KEYS.get(name)
        if key is None or key.applies:
            continue
        value = config.get(name)
        if value == parse_value(key, key.default):
            continue
        notes.append(
            f"{name}={config.entry(name).text} has no effect in Moldau: {key.not_applicable}"
        )
    return notes


_PER_LISTENER_KEYS = {"sasl.enabled.mechanisms", "max.connections"}


def _check_listener_overrides(config: BrokerConfig) -> None:
    """`listener.name.<listener>.*` must name a listener (or controller listener) of this node
    and a setting Moldau reads per listener: ssl.*, sasl.enabled.mechanisms,
    <mechanism>.sasl.jaas.config, or OAUTHBEARER's callback handler and validator keys (with
    or without the `oauthbearer.` prefix)."""
    names = {
        ListenerAddress.parse(item.strip()).name
        for item in config.get("listeners") or []
        if item.strip()
    }
    names |= {name.strip().upper() for name in config.get("controller.listener.names") or []}
    for property_name, (listener, key) in listener_overrides(config).items():
        if listener not in names:
            raise ConfigError(
                f"{property_name} names the listener {listener}, which is neither in listeners "
                "nor in controller.listener.names"
            )
        if key.endswith(".sasl.jaas.config"):
            mechanism = key[: -len(".sasl.jaas.config")].lower()
            if mechanism not in _JAAS_MECHANISMS:
                raise ConfigError(
                    f"{property_name} is for the SASL mechanism {mechanism.upper()}, which Moldau "
                    "does not support (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER); remove it"
                )
            continue  # parsed when the listener's settings are read
        if key.endswith(f".{CALLBACK_HANDLER}"):
            if key != MECHANISM_PREFIX + CALLBACK_HANDLER:
                raise ConfigError(
                    f"{property_name}: Moldau has no custom callback handlers (only OAUTHBEARER's "
                    "token validators, as listener.name.<listener>.oauthbearer."
                    f"{CALLBACK_HANDLER}); remove it"
                )
            check_callback_handler(property_name, (config.raw_unknown(property_name) or "").strip())
            continue
        key = key.removeprefix(MECHANISM_PREFIX)
        if key in VALIDATOR_KEYS:
            parse_value(BROKER_KEYS[key], config.raw_unknown(property_name))
            continue
        if not key.startswith("ssl.") and key not in _PER_LISTENER_KEYS:
            raise ConfigError(
                f"{property_name} is set, but Moldau reads only ssl.*, sasl.enabled.mechanisms, "
                "max.connections, <mechanism>.sasl.jaas.config and OAUTHBEARER's "
                f"{CALLBACK_HANDLER} and sasl.oauthbearer.* per listener; remove it"
            )
        if not _acted_on(key):
            raise ConfigError(f"{property_name}: {key} is not a TLS setting Moldau can act on")
        parse_value(BROKER_KEYS[key], config.raw_unknown(property_name))
