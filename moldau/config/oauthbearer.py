"""A SASL listener's OAUTHBEARER settings, from Kafka's properties (KIP-255, KIP-768):

    listener.name.<l>.oauthbearer.sasl.jaas.config
        OAuthBearerLoginModule required [options];   (required, as Kafka requires it)
    listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
        unset, or Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: unsecured tokens, for
            development; JAAS options unsecuredValidatorPrincipalClaimName (sub),
            unsecuredValidatorScopeClaimName (scope), unsecuredValidatorRequiredScope
            (space-separated), unsecuredValidatorAllowableClockSkewMs (0)
        OAuthBearerValidatorCallbackHandler: signed tokens, checked against the JWKS at
            sasl.oauthbearer.jwks.endpoint.url with sasl.oauthbearer.expected.audience,
            .expected.issuer, .sub.claim.name, .scope.claim.name, .clock.skew.seconds,
            .jwks.endpoint.refresh.ms and .jwks.endpoint.retry.backoff(.max).ms; an https
            endpoint is trusted through the JAAS options ssl.truststore.type, .location,
            .certificates, .password (as Kafka's), else the system's authorities

Every sasl.oauthbearer.* key may be given as listener.name.<l>.oauthbearer.<key>,
listener.name.<l>.<key> or <key>; the first found wins (Kafka's prefixes for a listener's
mechanism). What cannot work raises ConfigError, one line: an unknown callback handler class, a
validator key for a listener that does not use the validator (it would accept unsecured tokens
instead), the validator without a JWKS URL, a bad option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from moldau.config.definitions import BROKER_KEYS
from moldau.config.jaas import JaasEntry
from moldau.config.tls import LISTENER_PREFIX, listener_value, truststore_pem
from moldau.config.values import BrokerConfig, ConfigError

_PACKAGE = "org.apache.kafka.common.security.oauthbearer"
UNSECURED_VALIDATOR = f"{_PACKAGE}.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
SIGNED_VALIDATOR = f"{_PACKAGE}.OAuthBearerValidatorCallbackHandler"
# Kafka 3.1-3.3 named it in a `secured` package; 3.4+ still load that name.
SIGNED_VALIDATORS = (SIGNED_VALIDATOR, f"{_PACKAGE}.secured.OAuthBearerValidatorCallbackHandler")
CALLBACK_HANDLER = "sasl.server.callback.handler.class"
MECHANISM_PREFIX = "oauthbearer."
# The KIP-768 validator's keys (others, like the token endpoint, stay refused).
VALIDATOR_KEYS = tuple(
    name
    for name in BROKER_KEYS
    if name.startswith("sasl.oauthbearer.") and BROKER_KEYS[name].applies
)
_UNSECURED_OPTIONS = {
    "unsecuredValidatorPrincipalClaimName",
    "unsecuredValidatorScopeClaimName",
    "unsecuredValidatorRequiredScope",
    "unsecuredValidatorAllowableClockSkewMs",
}
_TRUSTSTORE_OPTIONS = {
    "ssl.truststore.type": "JKS",  # (Kafka's default, which Moldau refuses with its fix)
    "ssl.truststore.location": None,
    "ssl.truststore.certificates": None,
    "ssl.truststore.password": None,
}
JWKS_SCHEMES = ("https", "http", "file")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsecuredValidatorSettings:
    """Kafka's default: unsecured tokens (`alg: none`), for development."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class JwksValidatorSettings:
    """KIP-768: tokens signed by a key of the identity provider's JWKS."""

    jwks_url: str
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    subject_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    trusted_pem: bytes | None = field(default=None, repr=False)  # for an https endpoint

    @property
    def jwks_path(self) -> str | None:
        """The file of a file: URL (None for http and https)."""
        parts = urlsplit(self.jwks_url)
        return url2pathname(parts.path) if parts.scheme == "file" else None


OAuthBearerSettings = UnsecuredValidatorSettings | JwksValidatorSettings


def callback_handler(config: BrokerConfig, listener_name: str) -> str | None:
    """The listener's OAUTHBEARER server callback handler class, checked (None: the default)."""
    wanted = f"{LISTENER_PREFIX}{listener_name.lower()}.{MECHANISM_PREFIX}{CALLBACK_HANDLER}"
    for name in config.explicit_names():
        if name.lower() == wanted:
            value = (config.raw_unknown(name) or "").strip()
            check_callback_handler(name, value)
            return value or None
    return None


def check_callback_handler(name: str, value: str) -> None:
    if value and value != UNSECURED_VALIDATOR and value not in SIGNED_VALIDATORS:
        raise ConfigError(
            f"{name}={value} is not a callback handler Moldau has; use {SIGNED_VALIDATOR} "
            f"(signed tokens, KIP-768) or leave it unset ({UNSECURED_VALIDATOR}, unsecured "
            "tokens for development)"
        )


def oauthbearer_settings(
    config: BrokerConfig, listener_name: str, jaas: JaasEntry | None
) -> OAuthBearerSettings:
    """The listener's validator settings; `jaas` is its oauthbearer.sasl.jaas.config."""
    jaas_name = f"{LISTENER_PREFIX}{listener_name.lower()}.oauthbearer.sasl.jaas.config"
    if jaas is None:
        raise ConfigError(
            f"listener {listener_name} enables OAUTHBEARER but {jaas_name} is not set; give it "
            f"{_PACKAGE}.OAuthBearerLoginModule required; (with the unsecured validator's "
            "unsecuredValidator* options, if any)"
        )
    if callback_handler(config, listener_name) in SIGNED_VALIDATORS:
        return _jwks_settings(config, listener_name, jaas.options, jaas_name)
    return _unsecured_settings(jaas.options, jaas_name)


def _unsecured_settings(options: dict[str, str], jaas_name: str) -> UnsecuredValidatorSettings:
    for option in options:
        if option.startswith("unsecuredValidator") and option not in _UNSECURED_OPTIONS:
            raise ConfigError(
                f"{jaas_name}: {option} is not an option of Kafka's unsecured validator "
                f"({', '.join(sorted(_UNSECURED_OPTIONS))})"
            )
    skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip() or "0"
    try:
        skew = int(skew_text)
    except ValueError:
        skew = -1
    if not 0 <= skew < 2**31:
        raise ConfigError(
            f"{jaas_name}: unsecuredValidatorAllowableClockSkewMs={skew_text} must be a "
            "number of milliseconds, 0 or more"
        )
    return UnsecuredValidatorSettings(
        principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
        scope_claim=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
        required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
        clock_skew_ms=skew,
    )


def _jwks_settings(
    config: BrokerConfig, listener_name: str, options: dict[str, str], jaas_name: str
) -> JwksValidatorSettings:
    def value(name: str) -> Any:
        return listener_value(config, listener_name, name, mechanism="oauthbearer")

    url = str(value("sasl.oauthbearer.jwks.endpoint.url") or "").strip()
    if not url:
        raise ConfigError(
            f"listener {listener_name} validates OAUTHBEARER tokens with {SIGNED_VALIDATOR} "
            "but sasl.oauthbearer.jwks.endpoint.url is not set; give the identity provider's "
            "JWKS URL (https: or file:)"
        )
    parts = urlsplit(url)
    if parts.scheme.lower() not in JWKS_SCHEMES or not (parts.netloc or parts.path):
        raise ConfigError(
            f"sasl.oauthbearer.jwks.endpoint.url={url} (listener {listener_name}) must be an "
            "https:, http: or file: URL"
        )
    trusted = None
    if parts.scheme.lower() == "https":
        trusted = _jwks_truststore(options, jaas_name)
    for option in options:
        if option.startswith("ssl.") and option not in _TRUSTSTORE_OPTIONS:
            raise ConfigError(
                f"{jaas_name}: {option} is not read for the JWKS endpoint (Moldau reads "
                f"{', '.join(_TRUSTSTORE_OPTIONS)}); remove it"
            )
    issuer = value("sasl.oauthbearer.expected.issuer")
    return JwksValidatorSettings(
        jwks_url=url,
        expected_audience=tuple(
            item.strip()
            for item in value("sasl.oauthbearer.expected.audience") or []
            if item.strip()
        ),
        expected_issuer=str(issuer) if issuer else None,
        subject_claim=str(value("sasl.oauthbearer.sub.claim.name") or "sub"),
        scope_claim=str(value("sasl.oauthbearer.scope.claim.name") or "scope"),
        clock_skew_s=int(value("sasl.oauthbearer.clock.skew.seconds")),
        refresh_ms=int(value("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
        retry_backoff_ms=int(value("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")),
        retry_backoff_max_ms=int(value("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")),
        trusted_pem=trusted,
    )


def _jwks_truststore(options: dict[str, str], jaas_name: str) -> bytes | None:
    def value(name: str) -> Any:
        return options.get(name, _TRUSTSTORE_OPTIONS[name])

    try:
        return truststore_pem(value)
    except ConfigError as error:
        raise ConfigError(f"{jaas_name}: {error}") from None


def check_validator_keys(config: BrokerConfig, validating: set[str]) -> None:
    """A KIP-768 key set for no listener that uses the validator (`validating`, listener names)
    would leave tokens unchecked by it: refused. A listener-prefixed key concerns its listener;
    an unprefixed one, any."""
    for name in config.explicit_names():
        listener, key = None, name.lower()
        if key.startswith(LISTENER_PREFIX):
            listener, _, key = key[len(LISTENER_PREFIX) :].partition(".")
            listener = listener.upper()
            key = key.removeprefix(MECHANISM_PREFIX)
        if key not in VALIDATOR_KEYS:
            continue
        if listener in validating or (listener is None and validating):
            continue
        where = f"listener {listener}" if listener else "no listener"
        example = f"{LISTENER_PREFIX}{(listener or '<listener>').lower()}.{MECHANISM_PREFIX}"
        raise ConfigError(
            f"{name} is set, but {where} validates OAUTHBEARER tokens with "
            f"{SIGNED_VALIDATOR} (set {example}{CALLBACK_HANDLER} to it), so it would have "
            "no effect"
        )
