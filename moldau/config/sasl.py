"""SASL settings from Kafka's properties: what each SASL listener serves and how this node
authenticates to other nodes (Kafka's SaslChannelBuilder and JaasContext, per listener).

    sasl.enabled.mechanisms                    per listener too: listener.name.<l>.sasl.enabled.mechanisms
    listener.name.<l>.<mechanism>.sasl.jaas.config
        PlainLoginModule: user_<name>="<password>" are the users PLAIN accepts on <l>;
        username/password (either module) are this node's own, for its connections to <l>
        OAuthBearerLoginModule: how OAUTHBEARER tokens are validated on <l> (config/oauthbearer.py)
    sasl.mechanism.inter.broker.protocol       how brokers authenticate to each other
    sasl.mechanism.controller.protocol         how nodes authenticate to the controllers
    connections.max.reauth.ms                  KIP-368: a session's lifetime (0: unlimited)
    connection.failed.authentication.delay.ms  how long a failed authentication waits to answer

Mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. GSSAPI (Kafka's default for
the mechanism properties) is refused with `ConfigError`, as is anything that cannot work (a
PLAIN listener without users, an inter-node mechanism without credentials, OAUTHBEARER between
nodes, SCRAM on the controller listener: its credentials live in the metadata log the
controllers serve).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from moldau.config.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    parse_jaas_config,
)
from moldau.config.oauthbearer import OAuthBearerSettings, oauthbearer_settings
from moldau.config.tls import LISTENER_PREFIX, listener_value
from moldau.config.values import BrokerConfig, ConfigError

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)
LOGIN_MODULES = (
    {"PLAIN": PLAIN_LOGIN_MODULE}
    | dict.fromkeys(SCRAM_MECHANISMS, SCRAM_LOGIN_MODULE)
    | {OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}
)
JAAS_SUFFIX = ".sasl.jaas.config"
# What a client presents with OAUTHBEARER: (token, SASL extensions), asked for at every
# (re-)authentication.
TokenProvider = Callable[[], tuple[str, Mapping[str, str]]]


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """Who a client authenticates as, and how: PLAIN or a SCRAM mechanism with a username and
    password, or OAUTHBEARER with the token `token()` gives (`username` is then only a name
    for messages)."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    token: TokenProvider | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslListenerSettings:
    """What one SASL listener serves."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    oauthbearer: OAuthBearerSettings | None = None  # how tokens are validated, with OAUTHBEARER
    reauthentication_ms: int = 0  # connections.max.reauth.ms (0: sessions never expire)
    failure_delay_ms: int = 100  # connection.failed.authentication.delay.ms


def check_mechanism(mechanism: str, setting: str, usable: tuple[str, ...] = MECHANISMS) -> str:
    """The mechanism's name, upper-case; an unknown one, or GSSAPI, is refused naming the
    `usable` ones (a known one outside them is the caller's to refuse, with its reason)."""
    name = mechanism.strip().upper()
    if name in MECHANISMS:
        return name
    choices = f"{', '.join(usable[:-1])} or {usable[-1]}" if len(usable) > 1 else usable[0]
    if name == "GSSAPI":
        raise ConfigError(
            f"{setting} is GSSAPI (Kafka's default), which Moldau does not support; set it to "
            f"{choices}"
        )
    raise ConfigError(f"{setting} names the unknown SASL mechanism {mechanism!r} ({choices})")


def listener_jaas(config: BrokerConfig, listener_name: str, mechanism: str) -> JaasEntry | None:
    """`listener.name.<listener>.<mechanism>.sasl.jaas.config`, parsed (None when unset)."""
    wanted = f"{LISTENER_PREFIX}{listener_name.lower()}.{mechanism.lower()}{JAAS_SUFFIX}"
    for name in config.explicit_names():
        if name.lower() != wanted:
            continue
        raw = config.raw_unknown(name)
        if raw in (None, ""):
            return None
        try:
            entry = parse_jaas_config(str(raw))
        except JaasError as error:
            raise ConfigError(f"{name}: {error}") from None
        module = LOGIN_MODULES[mechanism]
        if entry.login_module != module:
            raise ConfigError(f"{name} names {entry.login_module}; {mechanism} needs {module}")
        return entry
    return None


def sasl_listener_settings(config: BrokerConfig, listener_name: str) -> SaslListenerSettings:
    setting = f"sasl.enabled.mechanisms (listener {listener_name})"
    enabled = listener_value(config, listener_name, "sasl.enabled.mechanisms") or []
    mechanisms = tuple(dict.fromkeys(check_mechanism(item, setting) for item in enabled))
    if not mechanisms:
        raise ConfigError(
            f"{setting} is empty: enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
        )
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        entry = listener_jaas(config, listener_name, "PLAIN")
        jaas = f"{LISTENER_PREFIX}{listener_name.lower()}.plain{JAAS_SUFFIX}"
        if entry is None:
            raise ConfigError(
                f"listener {listener_name} enables PLAIN but {jaas} is not set; give it "
                f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;'
            )
        users = {
            key[len("user_") :]: value
            for key, value in entry.options.items()
            if key.startswith("user_") and len(key) > len("user_")
        }
        if not users:
            raise ConfigError(f'{jaas} defines no user (user_<name>="<password>")')
    for mechanism in SCRAM_MECHANISMS:
        if mechanism in mechanisms:
            listener_jaas(config, listener_name, mechanism)  # checked if given
    oauthbearer = None
    if OAUTHBEARER in mechanisms:
        oauthbearer = oauthbearer_settings(
            config, listener_name, listener_jaas(config, listener_name, OAUTHBEARER)
        )
    return SaslListenerSettings(
        mechanisms=mechanisms,
        plain_users=users,
        oauthbearer=oauthbearer,
        reauthentication_ms=int(config.get("connections.max.reauth.ms")),
        failure_delay_ms=int(config.get("connection.failed.authentication.delay.ms")),
    )


def node_credentials(
    config: BrokerConfig, listener_name: str, *, setting: str, controller: bool = False
) -> SaslCredentials:
    """This node's credentials for its connections to `listener_name`, with the mechanism of
    `setting` (sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol)."""
    between_nodes = ("PLAIN",) if controller else ("PLAIN", *SCRAM_MECHANISMS)
    mechanism = check_mechanism(str(config.get(setting)), setting, between_nodes)
    if mechanism == OAUTHBEARER:
        raise ConfigError(
            f"{setting}=OAUTHBEARER: Moldau's nodes have no token of their own to authenticate "
            "to each other with; use PLAIN or SCRAM-SHA-256/512 between nodes (OAUTHBEARER "
            "stays available to clients)"
        )
    if controller and mechanism in SCRAM_MECHANISMS:
        raise ConfigError(
            f"{setting}={mechanism}: SCRAM credentials live in the metadata log, which the "
            "controllers must reach before any is known; use PLAIN for the controller listener "
            "(as Kafka requires)"
        )
    jaas = f"{LISTENER_PREFIX}{listener_name.lower()}.{mechanism.lower()}{JAAS_SUFFIX}"
    entry = listener_jaas(config, listener_name, mechanism)
    if entry is None or not entry.options.get("username") or "password" not in entry.options:
        raise ConfigError(
            f"listener {listener_name} is SASL with {setting}={mechanism}, so this node "
            f"authenticates to it: set {jaas} with its username and password"
        )
    return SaslCredentials(mechanism, entry.options["username"], entry.options["password"])
