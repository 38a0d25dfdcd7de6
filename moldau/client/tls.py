"""The client's TLS (`security.protocol=ssl`), with librdkafka's setting names.

    ssl.ca.location / ssl.ca.pem            the authorities trusted (else the system's)
    ssl.certificate.location + ssl.key.location (+ ssl.key.password), or
    ssl.certificate.pem + ssl.key.pem, or
    ssl.keystore.location (PKCS12) + ssl.keystore.password
                                            the client certificate, for brokers that ask
    ssl.endpoint.identification.algorithm   https (default): the broker's certificate must name
                                            the host connected to; none: it need not
    enable.ssl.certificate.verification     false: no verification at all (testing only)
    ssl.cipher.suites                       an OpenSSL cipher list (TLS 1.2)

The Java client's names work too, so that a Kafka client's properties (or Spark's `kafka.*`
options) carry over: `ssl.truststore.type` PEM or PKCS12 with `ssl.truststore.location` (+
`ssl.truststore.password`) or inline `ssl.truststore.certificates`; `ssl.keystore.type=PEM` with
`ssl.keystore.location` (a PEM file holding key and chain) or inline
`ssl.keystore.certificate.chain` + `ssl.keystore.key`, or `ssl.keystore.type=PKCS12`;
`ssl.enabled.protocols` and `ssl.protocol`. JKS, Java's default store type, is refused with how
to convert it. A setting given both ways (`ssl.ca.location` and `ssl.truststore.location`) is
refused.

`ssl_context_of(config)` is None for plaintext and sasl_plaintext (SASL: moldau.client.sasl).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException
from moldau.config.tls import (
    KeyMaterial,
    keystore_material,
    load_key_material,
    protocol_versions,
    truststore_pem,
)
from moldau.config.values import ConfigError

__all__ = ["ssl_context_of"]

_SSL_SETTINGS = (
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.cipher.suites",
)
_JAVA_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.certificates")
_LIBRDKAFKA_CA = ("ssl.ca.location", "ssl.ca.pem")
_LIBRDKAFKA_CERTIFICATE = (
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
)
_JAVA_KEYSTORE = ("ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key")


def ssl_context_of(config: ClientConfig) -> ssl.SSLContext | None:
    protocol = config.get_str("security.protocol").strip().lower()
    if protocol in ("plaintext", "sasl_plaintext"):
        given = [name for name in _SSL_SETTINGS if config.get_optional_str(name)]
        if given:
            raise ConfigException(
                f"{given[0]} is set but security.protocol is {protocol}; set "
                "security.protocol=ssl or sasl_ssl to connect with TLS"
            )
        return None
    if protocol not in ("ssl", "sasl_ssl"):
        raise ConfigException(
            "security.protocol must be plaintext, ssl, sasl_plaintext or sasl_ssl, not "
            f"{protocol!r}"
        )
    try:
        return _context(config)
    except ConfigError as error:
        raise ConfigException(str(error)) from None


def _read(config: ClientConfig, name: str) -> bytes:
    path = config.get_str(name)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise ConfigException(f"cannot read {name}={path}: {error.strerror or error}") from None


def _given(config: ClientConfig, names: tuple[str, ...]) -> str | None:
    return next((name for name in names if config.get_optional_str(name)), None)


def _one_way(config: ClientConfig, first: tuple[str, ...], second: tuple[str, ...]) -> None:
    one, other = _given(config, first), _given(config, second)
    if one and other:
        raise ConfigException(f"{one} and {other} are both set; give one of them")


def _context(config: ClientConfig) -> ssl.SSLContext:
    _one_way(config, _LIBRDKAFKA_CA, _JAVA_TRUSTSTORE)
    _one_way(config, _LIBRDKAFKA_CERTIFICATE, _JAVA_KEYSTORE)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.minimum_version, context.maximum_version = protocol_versions(
            [item.strip() for item in config.get_str("ssl.enabled.protocols").split(",")],
            config.get_str("ssl.protocol").strip(),
        )
    except ConfigError as error:
        raise ConfigException(str(error).replace("Moldau serves", "Moldau speaks")) from None
    verify = config.get_bool("enable.ssl.certificate.verification")
    algorithm = config.get_str("ssl.endpoint.identification.algorithm").strip().lower()
    if algorithm not in ("https", "none", ""):
        raise ConfigException(
            f"ssl.endpoint.identification.algorithm must be https or none, not {algorithm!r}"
        )
    context.check_hostname = verify and algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    ciphers = config.get_optional_str("ssl.cipher.suites")
    if ciphers:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError:
            raise ConfigException(f"ssl.cipher.suites={ciphers}: no usable cipher") from None
    ca_location = config.get_optional_str("ssl.ca.location")
    ca_pem = config.get_optional_str("ssl.ca.pem")
    try:
        if ca_location and os.path.isdir(ca_location):
            context.load_verify_locations(capath=ca_location)
        elif ca_location:
            context.load_verify_locations(cadata=_read(config, "ssl.ca.location").decode("ascii"))
        elif ca_pem:
            context.load_verify_locations(cadata=ca_pem)
        elif _given(config, _JAVA_TRUSTSTORE):
            trusted = truststore_pem(_java_value(config))
            assert trusted is not None
            context.load_verify_locations(cadata=trusted.decode("ascii"))
        elif verify:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (ssl.SSLError, ValueError) as error:
        raise ConfigException(f"the CA certificates do not load: {error}") from None
    material = _client_certificate(config)
    if material is not None:
        load_key_material(context, material)
    return context


def _java_value(config: ClientConfig) -> Callable[[str], Any]:
    """The Java client's settings as moldau.config.tls reads a listener's: an unset keystore
    type is librdkafka's PKCS12 (its `ssl.keystore.location`), an unset truststore type Java's
    JKS."""

    def value(name: str) -> Any:
        if name == "ssl.keystore.type":
            return config.get_optional_str(name) or "PKCS12"
        return config.get_optional_str(name)

    return value


def _client_certificate(config: ClientConfig) -> KeyMaterial | None:
    password = config.get_optional_str("ssl.key.password")
    if _given(config, _JAVA_KEYSTORE):
        return keystore_material(_java_value(config))
    if config.get_optional_str("ssl.certificate.location"):
        if not config.get_optional_str("ssl.key.location"):
            raise ConfigException("ssl.certificate.location needs ssl.key.location")
        return KeyMaterial(
            _read(config, "ssl.certificate.location"),
            _read(config, "ssl.key.location"),
            password,
            "ssl.key.location",
        )
    if config.get_optional_str("ssl.certificate.pem"):
        if not config.get_optional_str("ssl.key.pem"):
            raise ConfigException("ssl.certificate.pem needs ssl.key.pem")
        return KeyMaterial(
            config.get_str("ssl.certificate.pem").encode(),
            config.get_str("ssl.key.pem").encode(),
            password,
            "ssl.key.pem",
        )
    if config.get_optional_str("ssl.key.location") or config.get_optional_str("ssl.key.pem"):
        raise ConfigException("a client key needs its certificate (ssl.certificate.location)")
    return None
