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

`ssl_context_of(config)` is None for plaintext and sasl_plaintext (SASL: moldau.client.sasl).
"""

from __future__ import annotations

import os
import ssl

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException
from moldau.config.tls import KeyMaterial, load_key_material, pkcs12_key_material
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
    "ssl.cipher.suites",
)


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


def _context(config: ClientConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
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
        elif verify:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (ssl.SSLError, ValueError) as error:
        raise ConfigException(f"the CA certificates do not load: {error}") from None
    material = _client_certificate(config)
    if material is not None:
        load_key_material(context, material)
    return context


def _client_certificate(config: ClientConfig) -> KeyMaterial | None:
    password = config.get_optional_str("ssl.key.password")
    if config.get_optional_str("ssl.keystore.location"):
        return pkcs12_key_material(
            _read(config, "ssl.keystore.location"),
            config.get_optional_str("ssl.keystore.password"),
            None,
            "ssl.keystore.location",
        )
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
