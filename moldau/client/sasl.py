"""The client's SASL (`security.protocol=sasl_plaintext|sasl_ssl`), with librdkafka's setting
names and the Java client's JAAS form:

    sasl.mechanism      PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI,
                        librdkafka's default, is refused)
    sasl.username       the user ...
    sasl.password       ... and its password, or instead
    sasl.jaas.config    PlainLoginModule / ScramLoginModule required username="..." password="...";

    OAUTHBEARER's token comes from one of
    oauth_cb            confluent-kafka's callback: oauth_cb(sasl.oauthbearer.config) returns
                        the token, or (token, expiry) or (token, expiry, principal, extensions)
    enable.sasl.oauthbearer.unsecure.jwt=true with
    sasl.oauthbearer.config   librdkafka's unsecured token, for development:
                        principal=<name> [principalClaimName=sub] [scope=a,b]
                        [scopeClaimName=scope] [lifeSeconds=3600] [extension_<key>=<value>]
    sasl.jaas.config    or the Java client's unsecured token: OAuthBearerLoginModule required
                        unsecuredLoginStringClaim_sub="alice" [unsecuredLoginListClaim_scope=",a"]
                        [unsecuredLoginLifetimeSeconds=3600] [unsecuredLoginExtension_<key>=..];

`sasl_credentials_of(config)` is None without SASL. `authenticate(connection, credentials)` runs
SaslHandshake v1 and SaslAuthenticate (KIP-152) on a connection that has negotiated versions and
returns the session's lifetime in seconds (0: unlimited, KIP-368). An OAUTHBEARER token is asked
for at every (re-)authentication.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException, ErrorCode, KafkaException
from moldau.config.jaas import JaasEntry, JaasError, parse_jaas_config
from moldau.config.sasl import (
    LOGIN_MODULES,
    OAUTHBEARER,
    SaslCredentials,
    TokenProvider,
    check_mechanism,
)
from moldau.config.values import ConfigError
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.sasl.oauthbearer import ACKNOWLEDGE_ERROR, initial_response, unsecured_token
from moldau.protocol.sasl.plain import plain_message
from moldau.protocol.sasl.scram import ScramClient, ScramFailure


class SaslConnection(Protocol):
    """What authenticating needs of a connection (a `BrokerConnection` is one): its address, the
    versions the broker serves, and a request."""

    @property
    def address(self) -> str: ...

    @property
    def versions(self) -> Any: ...

    async def request(
        self, api_key: int, data: Mapping[str, Any], *, version: int | None = None
    ) -> Any: ...


__all__ = ["authenticate", "sasl_credentials_of"]

SASL_PROTOCOLS = ("sasl_plaintext", "sasl_ssl")
_SETTINGS = ("sasl.username", "sasl.password", "sasl.jaas.config", "sasl.oauthbearer.config")
_UNSECURED_NAMES = ("principal", "principalClaimName", "scope", "scopeClaimName", "lifeSeconds")


def sasl_credentials_of(config: ClientConfig) -> SaslCredentials | None:
    protocol = config.get_str("security.protocol").strip().lower()
    if protocol not in SASL_PROTOCOLS:
        given = [name for name in _SETTINGS if config.get_optional_str(name)]
        if given:
            raise ConfigException(
                f"{given[0]} is set but security.protocol is {protocol}; set "
                "security.protocol=sasl_plaintext or sasl_ssl to authenticate with SASL"
            )
        return None
    try:
        mechanism = check_mechanism(config.get_str("sasl.mechanism"), "sasl.mechanism")
    except ConfigError as error:
        raise ConfigException(str(error)) from None
    if mechanism == OAUTHBEARER:
        return _oauthbearer_credentials(config)
    jaas = config.get_optional_str("sasl.jaas.config")
    username = config.get_optional_str("sasl.username")
    if jaas and (username or config.get_optional_str("sasl.password")):
        raise ConfigException("give sasl.username/sasl.password or sasl.jaas.config, not both")
    if jaas:
        entry = _jaas_entry(jaas, mechanism)
        username = entry.options.get("username")
        password = entry.options.get("password")
    else:
        password = config.get_optional_str("sasl.password")
    if not username or password is None:
        raise ConfigException(
            f"security.protocol={protocol} needs sasl.username and sasl.password (or "
            "sasl.jaas.config)"
        )
    return SaslCredentials(mechanism, username, password)


def _jaas_entry(jaas: str, mechanism: str) -> JaasEntry:
    """`sasl.jaas.config` parsed, naming the login module `mechanism` needs."""
    try:
        entry = parse_jaas_config(jaas)
    except JaasError as error:
        raise ConfigException(f"sasl.jaas.config: {error}") from None
    if entry.login_module != LOGIN_MODULES[mechanism]:
        raise ConfigException(
            f"sasl.jaas.config names {entry.login_module}; sasl.mechanism={mechanism} needs "
            f"{LOGIN_MODULES[mechanism]}"
        )
    return entry


def _oauthbearer_credentials(config: ClientConfig) -> SaslCredentials:
    """OAUTHBEARER's token from `oauth_cb` or, for development, an unsecured token (librdkafka's
    `sasl.oauthbearer.config`, or the Java client's `unsecuredLogin*` JAAS options)."""
    for name in ("sasl.username", "sasl.password"):
        if config.get_optional_str(name):
            raise ConfigException(
                f"{name} is set but sasl.mechanism=OAUTHBEARER authenticates with a token "
                "(oauth_cb, or sasl.oauthbearer.config for an unsecured one); remove it"
            )
    callback = config.get("oauth_cb")
    unsecured = config.get_bool("enable.sasl.oauthbearer.unsecure.jwt")
    text = config.get_str("sasl.oauthbearer.config")
    jaas = config.get_optional_str("sasl.jaas.config")
    if jaas and (callback is not None or unsecured):
        raise ConfigException(
            "sasl.jaas.config (the Java client's unsecured token) cannot be combined with "
            "oauth_cb or enable.sasl.oauthbearer.unsecure.jwt; give one of them"
        )
    if jaas:
        principal, tokens = _java_unsecured_tokens(jaas)
        return SaslCredentials(OAUTHBEARER, principal, "", tokens)
    if callback is not None and unsecured:
        raise ConfigException(
            "oauth_cb and enable.sasl.oauthbearer.unsecure.jwt=true are mutually exclusive "
            "(as in librdkafka)"
        )
    if callback is not None:
        if not callable(callback):
            raise ConfigException("oauth_cb must be a callable: oauth_cb(config) -> token")
        return SaslCredentials(OAUTHBEARER, "(oauth_cb)", "", _callback_tokens(callback, text))
    if not unsecured:
        raise ConfigException(
            "sasl.mechanism=OAUTHBEARER needs a token: give oauth_cb, or for development "
            "enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config="
            "principal=<name>"
        )
    principal, tokens = unsecured_tokens(text)
    return SaslCredentials(OAUTHBEARER, principal, "", tokens)


def unsecured_tokens(
    text: str, clock: Callable[[], float] = time.time
) -> tuple[str, TokenProvider]:
    """librdkafka's unsecured JWT from `sasl.oauthbearer.config` (ConfigException when it is
    malformed): its principal, and a new token, issued now, each time one is asked for."""
    settings: dict[str, str] = {}
    extensions: dict[str, str] = {}
    for item in text.split():
        name, equals, value = item.partition("=")
        if not equals:
            raise ConfigException(f"sasl.oauthbearer.config: expected name=value, got {item!r}")
        if name.startswith("extension_") and len(name) > len("extension_"):
            extensions[name[len("extension_") :]] = value
        elif name in _UNSECURED_NAMES:
            settings[name] = value
        else:
            raise ConfigException(
                f"sasl.oauthbearer.config: unknown name {name!r} (principal, principalClaimName, "
                "scope, scopeClaimName, lifeSeconds, extension_<key>)"
            )
    principal = settings.get("principal")
    if not principal:
        raise ConfigException("sasl.oauthbearer.config needs principal=<name> (the token's sub)")
    claims: dict[str, Any] = {settings.get("principalClaimName", "sub"): principal}
    scope = [item for item in settings.get("scope", "").split(",") if item]
    if scope:
        claims[settings.get("scopeClaimName", "scope")] = scope
    life = settings.get("lifeSeconds", "3600")
    tokens = _unsecured_provider(
        claims, life, extensions, clock, "sasl.oauthbearer.config", "lifeSeconds"
    )
    return principal, tokens


# The Java client's OAuthBearerUnsecuredLoginCallbackHandler options.
_JAVA_CLAIM_KINDS = ("unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_")
_JAVA_LIST_CLAIM = "unsecuredLoginListClaim_"
_JAVA_EXTENSION = "unsecuredLoginExtension_"
_JAVA_PRINCIPAL_CLAIM = "unsecuredLoginPrincipalClaimName"
_JAVA_LIFETIME = "unsecuredLoginLifetimeSeconds"


def _java_unsecured_tokens(
    jaas: str, clock: Callable[[], float] = time.time
) -> tuple[str, TokenProvider]:
    """The Java client's unsecured token: `OAuthBearerLoginModule required
    unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",a,b";` (a list claim's
    first character is its separator)."""
    entry = _jaas_entry(jaas, OAUTHBEARER)
    claims: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    for name, value in entry.options.items():
        kind = next((kind for kind in _JAVA_CLAIM_KINDS if name.startswith(kind)), None)
        if kind is not None and len(name) > len(kind):
            claim = name[len(kind) :]
            if kind.endswith("NumberClaim_"):
                try:
                    claims[claim] = float(value) if "." in value else int(value)
                except ValueError:
                    raise ConfigException(
                        f"sasl.jaas.config: {name}={value} is not a number"
                    ) from None
            else:
                claims[claim] = value
        elif name.startswith(_JAVA_LIST_CLAIM) and len(name) > len(_JAVA_LIST_CLAIM):
            separator, items = value[:1], value[1:]
            claims[name[len(_JAVA_LIST_CLAIM) :]] = [x for x in items.split(separator) if x]
        elif name.startswith(_JAVA_EXTENSION) and len(name) > len(_JAVA_EXTENSION):
            extensions[name[len(_JAVA_EXTENSION) :]] = value
        elif name not in (_JAVA_PRINCIPAL_CLAIM, _JAVA_LIFETIME, "unsecuredLoginScopeClaimName"):
            raise ConfigException(
                f"sasl.jaas.config: option {name!r} is not one of the unsecured login's "
                "(unsecuredLoginStringClaim_<claim>, ...NumberClaim_, ...ListClaim_, "
                "...Extension_, unsecuredLoginPrincipalClaimName, unsecuredLoginLifetimeSeconds); "
                "for tokens from an OAuth server use oauth_cb"
            )
    principal_claim = entry.options.get(_JAVA_PRINCIPAL_CLAIM, "sub")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal:
        raise ConfigException(
            f'sasl.jaas.config needs unsecuredLoginStringClaim_{principal_claim}="<name>" '
            "(the token's principal)"
        )
    life = entry.options.get(_JAVA_LIFETIME, "3600")
    return principal, _unsecured_provider(
        claims, life, extensions, clock, "sasl.jaas.config", _JAVA_LIFETIME
    )


def _unsecured_provider(
    claims: Mapping[str, Any],
    life: str,
    extensions: Mapping[str, str],
    clock: Callable[[], float],
    setting: str,
    life_name: str,
) -> TokenProvider:
    """A new unsecured token with `claims`, issued now and living `life` seconds, at each ask."""
    if not life.isdigit() or int(life) == 0:
        raise ConfigException(f"{setting}: {life_name}={life} is not a number > 0")
    try:
        initial_response("x", extensions=extensions)
    except ValueError as error:
        raise ConfigException(f"{setting}: {error}") from None

    def token() -> tuple[str, Mapping[str, str]]:
        now = clock()
        issued = {**claims, "iat": round(now, 3), "exp": round(now + int(life), 3)}
        return unsecured_token(issued), dict(extensions)

    return token


def _callback_tokens(callback: Callable[[str], Any], text: str) -> TokenProvider:
    def token() -> tuple[str, Mapping[str, str]]:
        answer = callback(text)
        if isinstance(answer, str):
            return answer, {}
        if isinstance(answer, tuple) and len(answer) in (2, 4) and isinstance(answer[0], str):
            return answer[0], dict(answer[3] or {}) if len(answer) == 4 else {}
        raise TypeError(
            "oauth_cb must return the token, (token, expiry) or (token, expiry, principal, "
            f"extensions), not {type(answer).__name__}"
        )

    return token


async def authenticate(connection: SaslConnection, credentials: SaslCredentials) -> float:
    handshake = await connection.request(
        ApiKey.SASL_HANDSHAKE, {"mechanism": credentials.mechanism}, version=1
    )
    if handshake.error_code != ErrorCode.none:
        raise KafkaException(
            handshake.error_code,
            f"{connection.address} does not enable SASL mechanism {credentials.mechanism} "
            f"(it enables {', '.join(handshake.mechanisms) or 'none'})",
        )
    if credentials.mechanism == "PLAIN":
        answer = await _step(connection, plain_message(credentials.username, credentials.password))
    elif credentials.mechanism == OAUTHBEARER:
        answer = await _oauthbearer(connection, credentials)
    else:
        client = ScramClient(credentials.mechanism, credentials.username, credentials.password)
        try:
            first = await _step(connection, client.first())
            answer = await _step(connection, client.final(first.auth_bytes))
            client.verify(answer.auth_bytes)
        except ScramFailure as failure:
            raise KafkaException(
                ErrorCode.sasl_authentication_failed, f"{connection.address}: {failure}"
            ) from None
    lifetime = getattr(answer, "session_lifetime", 0) or 0
    seconds = lifetime.total_seconds() if hasattr(lifetime, "total_seconds") else lifetime / 1000
    return float(seconds)


async def _oauthbearer(connection: SaslConnection, credentials: SaslCredentials) -> Any:
    assert credentials.token is not None
    try:
        token, extensions = credentials.token()
        message = initial_response(token, extensions=extensions)
    except Exception as error:  # (the application's callback)
        raise KafkaException(
            ErrorCode.sasl_authentication_failed, f"no OAUTHBEARER token: {error}"
        ) from None
    answer = await _step(connection, message)
    if answer.auth_bytes:  # the broker's error (RFC 7628): acknowledged, then it fails
        await _step(connection, ACKNOWLEDGE_ERROR)
        raise KafkaException(
            ErrorCode.sasl_authentication_failed,
            f"{connection.address}: {bytes(answer.auth_bytes).decode(errors='replace')}",
        )
    return answer


async def _step(connection: SaslConnection, token: bytes) -> Any:
    version = min(connection.versions.pick(ApiKey.SASL_AUTHENTICATE), 2)
    answer = await connection.request(
        ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=version
    )
    if answer.error_code != ErrorCode.none:
        raise KafkaException(
            answer.error_code, f"{connection.address}: {answer.error_message or 'SASL failed'}"
        )
    return answer
