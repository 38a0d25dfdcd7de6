"""TLS settings from Kafka's `ssl.*` properties, and the `ssl.SSLContext`s they make.

Mirrors Kafka's DefaultSslEngineFactory: a listener's settings are its `listener.name.<name>.ssl.*`
properties, each falling back to the unprefixed `ssl.*` one (`valuesWithPrefixOverride`). Key
material comes as PEM (`ssl.keystore.type=PEM`: a file holding key and chain, or inline
`ssl.keystore.certificate.chain` + `ssl.keystore.key`) or PKCS12 (read with `cryptography`);
JKS is refused. Anything that cannot be set up raises `ConfigError` with one line naming the
property, so a listener never starts without the TLS it was configured for.

`server_context(settings)` is a listener's; `client_context(settings)` is this node's side of its
connections to other nodes (truststore, keystore as client certificate, hostname checks).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from moldau.config.definitions import BROKER_KEYS
from moldau.config.values import BrokerConfig, ConfigError, parse_value

LISTENER_PREFIX = "listener.name."
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# TLS 1.3 suites: OpenSSL enables all of these and Python's ssl module cannot narrow them.
TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
# IANA (Java) names of TLS 1.2 suites -> OpenSSL's names.
TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
}
CLIENT_AUTH_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key (PEM, possibly encrypted) and its certificate chain (PEM)."""

    chain_pem: bytes
    key_pem: bytes
    password: str | None
    source: str  # the property it came from, for error messages


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    """One listener's (or one client's) TLS settings, read and checked."""

    keystore: KeyMaterial | None
    trusted_pem: bytes | None  # None: the system's default authorities
    client_auth: str = "none"
    versions: tuple[ssl.TLSVersion, ssl.TLSVersion] = (
        ssl.TLSVersion.TLSv1_2,
        ssl.TLSVersion.TLSv1_3,
    )
    openssl_ciphers: str | None = None
    check_hostname: bool = True
    principal_mapping_rules: str = "DEFAULT"


# --- reading properties ----------------------------------------------------------------------


def listener_value(
    config: BrokerConfig, listener_name: str, name: str, *, mechanism: str | None = None
) -> Any:
    """`listener.name.<listener>.<name>` if set (any case of the listener name), else `name`;
    with a SASL `mechanism`, `listener.name.<listener>.<mechanism>.<name>` first (Kafka's
    prefixes for a listener's mechanism)."""
    prefix = f"{LISTENER_PREFIX}{listener_name.lower()}."
    wanted = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
    for prefixed in [*wanted, prefix + name]:
        for explicit in config.explicit_names():
            if explicit.lower() == prefixed:
                raw = config.raw_unknown(explicit)
                if raw is not None:
                    return parse_value(BROKER_KEYS[name], raw)
    return config.get(name)


def listener_overrides(config: BrokerConfig) -> dict[str, tuple[str, str]]:
    """Every `listener.name.<listener>.<key>` property: name -> (listener, key)."""
    found = {}
    for name in config.unknown_names():
        if name.startswith(LISTENER_PREFIX):
            listener, _, key = name[len(LISTENER_PREFIX) :].partition(".")
            found[name] = (listener.upper(), key)
    return found


def tls_settings(config: BrokerConfig, listener_name: str) -> TlsSettings:
    """The TLS settings of `listener_name` (its prefixed properties over the plain ones)."""

    def value(name: str) -> Any:
        return listener_value(config, listener_name, name)

    return tls_settings_from(value, where=f" (listener {listener_name})")


def tls_settings_from(value: Callable[[str], Any], *, where: str) -> TlsSettings:
    """TLS settings from `value(ssl.* name)`; `where` ends each error message."""
    try:
        return TlsSettings(
            keystore=keystore_material(value),
            trusted_pem=truststore_pem(value),
            client_auth=str(value("ssl.client.auth")),
            versions=protocol_versions(value("ssl.enabled.protocols"), str(value("ssl.protocol"))),
            openssl_ciphers=_ciphers(
                value("ssl.cipher.suites") or [], value("ssl.enabled.protocols")
            ),
            check_hostname=_endpoint_identification(value("ssl.endpoint.identification.algorithm")),
            principal_mapping_rules=str(value("ssl.principal.mapping.rules") or "DEFAULT"),
        )
    except ConfigError as error:
        raise ConfigError(f"{error}{where}") from None


def _read(path: str, name: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise ConfigError(f"cannot read {name}={path}: {error.strerror or error}") from None


def keystore_material(value: Any) -> KeyMaterial | None:
    kind = str(value("ssl.keystore.type")).upper()
    location = value("ssl.keystore.location")
    chain = value("ssl.keystore.certificate.chain")
    key = value("ssl.keystore.key")
    store_password = value("ssl.keystore.password")
    key_password = value("ssl.key.password")
    if (chain or key) and location:
        raise ConfigError(
            "ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key are "
            "both set; give the key one way"
        )
    if chain or key:
        if kind != "PEM":
            raise ConfigError(
                "ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM"
            )
        if not (chain and key):
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            raise ConfigError(f"{missing} is missing (the inline PEM key needs both)")
        if store_password:
            raise ConfigError("ssl.keystore.password cannot be set with PEM (use ssl.key.password)")
        return KeyMaterial(str(chain).encode(), str(key).encode(), key_password, "ssl.keystore.key")
    if not location:
        return None
    _refuse_jks(kind, "keystore")
    data = _read(str(location), "ssl.keystore.location")
    source = f"ssl.keystore.location={location}"
    if kind == "PEM":
        if store_password:
            raise ConfigError("ssl.keystore.password cannot be set with PEM (use ssl.key.password)")
        return KeyMaterial(_certificates_pem(data, source), data, key_password, source)
    return pkcs12_key_material(data, store_password, key_password, source)


def truststore_pem(value: Any) -> bytes | None:
    """The trusted certificates of `ssl.truststore.*` as `value(name)` gives them (PEM, PKCS12;
    JKS refused), or None: the system's authorities."""
    kind = str(value("ssl.truststore.type")).upper()
    location = value("ssl.truststore.location")
    inline = value("ssl.truststore.certificates")
    password = value("ssl.truststore.password")
    if inline and location:
        raise ConfigError(
            "ssl.truststore.location and ssl.truststore.certificates are both set; give one"
        )
    if inline:
        if kind != "PEM":
            raise ConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
        return _certificates_pem(str(inline).encode(), "ssl.truststore.certificates", required=True)
    if not location:
        return None
    _refuse_jks(kind, "truststore")
    data = _read(str(location), "ssl.truststore.location")
    source = f"ssl.truststore.location={location}"
    if kind == "PEM":
        if password:
            raise ConfigError("ssl.truststore.password cannot be set with PEM")
        return _certificates_pem(data, source, required=True)
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as error:
        raise ConfigError(
            f"cannot open {source}: {error} (wrong ssl.truststore.password?)"
        ) from None
    certificates = [entry.certificate for entry in store.additional_certs]
    if store.cert is not None:
        certificates.append(store.cert.certificate)
    if not certificates:
        raise ConfigError(f"{source} holds no certificate")
    return b"".join(c.public_bytes(Encoding.PEM) for c in certificates)


def _refuse_jks(kind: str, store: str) -> None:
    if kind == "JKS":
        raise ConfigError(
            f"ssl.{store}.type is JKS (Kafka's default), which Moldau cannot read; set "
            f"ssl.{store}.type=PEM or PKCS12 (keytool -importkeystore -deststoretype PKCS12 "
            "converts a JKS store)"
        )


def _certificates_pem(data: bytes, source: str, *, required: bool = False) -> bytes:
    """The certificate blocks of a PEM text (a keystore file also holds its key)."""
    blocks = []
    rest = data
    begin, end = b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"
    while (start := rest.find(begin)) >= 0:
        stop = rest.find(end, start)
        if stop < 0:
            break
        blocks.append(rest[start : stop + len(end)] + b"\n")
        rest = rest[stop + len(end) :]
    if not blocks:
        raise ConfigError(f"{source} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return b"".join(blocks)


def pkcs12_key_material(
    data: bytes, store_password: str | None, key_password: str | None, source: str
) -> KeyMaterial:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        store = pkcs12.load_pkcs12(data, store_password.encode() if store_password else None)
    except ValueError as error:
        raise ConfigError(f"cannot open {source}: {error} (wrong ssl.keystore.password?)") from None
    if store.key is None or store.cert is None:
        raise ConfigError(f"{source} holds no private key with a certificate")
    if key_password and key_password != store_password:
        raise ConfigError(
            f"{source}: a PKCS12 keystore's key is protected by ssl.keystore.password; leave "
            "ssl.key.password unset or give it the same value"
        )
    chain = [store.cert.certificate] + [entry.certificate for entry in store.additional_certs]
    key_pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return KeyMaterial(b"".join(c.public_bytes(Encoding.PEM) for c in chain), key_pem, None, source)


def protocol_versions(enabled: Any, protocol: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    names = list(enabled or [])
    unknown = [name for name in names if name not in TLS_VERSIONS]
    if unknown or not names:
        raise ConfigError(
            f"ssl.enabled.protocols={','.join(names)}: Moldau serves TLSv1.2 and TLSv1.3 only"
        )
    if protocol in ("TLSv1.3", "TLS"):
        highest = ssl.TLSVersion.TLSv1_3
    elif protocol == "TLSv1.2":
        highest = ssl.TLSVersion.TLSv1_2
    else:
        raise ConfigError(f"ssl.protocol={protocol}: use TLSv1.3 (or TLS) or TLSv1.2")
    versions = sorted(TLS_VERSIONS[name] for name in names if TLS_VERSIONS[name] <= highest)
    if not versions:
        raise ConfigError(
            f"ssl.enabled.protocols={','.join(names)} enables nothing at or below "
            f"ssl.protocol={protocol}"
        )
    return versions[0], versions[-1]


def _ciphers(suites: list[str], enabled: Any) -> str | None:
    if not suites:
        return None
    names = set(suites)
    tls13 = names & TLS13_SUITES
    if "TLSv1.3" in (enabled or []) and tls13 != TLS13_SUITES:
        raise ConfigError(
            "ssl.cipher.suites cannot narrow the TLS 1.3 suites (OpenSSL enables all of "
            f"{', '.join(sorted(TLS13_SUITES))}): list all of them, or set "
            "ssl.enabled.protocols=TLSv1.2"
        )
    unknown = sorted(names - TLS13_SUITES - set(TLS12_SUITES))
    if unknown:
        raise ConfigError(
            f"ssl.cipher.suites names suites Moldau does not know: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(TLS12_SUITES))} and the TLS 1.3 ones)"
        )
    openssl = [TLS12_SUITES[name] for name in suites if name in TLS12_SUITES]
    if not openssl:
        if "TLSv1.2" in (enabled or []):
            raise ConfigError(
                "ssl.cipher.suites names no TLS 1.2 suite while TLSv1.2 is enabled; add one "
                "or set ssl.enabled.protocols=TLSv1.3"
            )
        return None
    return ":".join(openssl)


def _endpoint_identification(value: Any) -> bool:
    text = str(value or "").strip().lower()
    if text not in ("", "https"):
        raise ConfigError(
            f"ssl.endpoint.identification.algorithm={value}: use https (check host names) "
            "or an empty value (do not)"
        )
    return text == "https"


# --- contexts --------------------------------------------------------------------------------


def server_context(settings: TlsSettings, *, listener_name: str) -> ssl.SSLContext:
    """A listener's context; ConfigError when its key or trust material does not load."""
    if settings.keystore is None:
        raise ConfigError(
            f"listener {listener_name} is SSL but has no key: set ssl.keystore.location (with "
            "ssl.keystore.type=PEM or PKCS12) or ssl.keystore.certificate.chain and "
            "ssl.keystore.key (or their listener.name."
            f"{listener_name.lower()}.ssl.* forms)"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings, listener_name, ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = CLIENT_AUTH_MODES[settings.client_auth]
    return context


def client_context(settings: TlsSettings, *, listener_name: str) -> ssl.SSLContext:
    """This node's side of a connection to another node's `listener_name`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, settings, listener_name, ssl.Purpose.SERVER_AUTH)
    context.check_hostname = settings.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _common(
    context: ssl.SSLContext, settings: TlsSettings, listener_name: str, purpose: ssl.Purpose
) -> None:
    where = f" (listener {listener_name})"
    context.minimum_version, context.maximum_version = settings.versions
    if settings.openssl_ciphers is not None:
        try:
            context.set_ciphers(settings.openssl_ciphers)
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites enables no suite OpenSSL offers{where}") from None
    if settings.keystore is not None:
        load_key_material(context, settings.keystore, where=where)
    if settings.trusted_pem is not None:
        try:
            context.load_verify_locations(cadata=settings.trusted_pem.decode("ascii"))
        except (ssl.SSLError, ValueError) as error:
            raise ConfigError(
                f"the truststore's certificates do not load: {error}{where}"
            ) from None
    else:
        context.load_default_certs(purpose)


def load_key_material(context: ssl.SSLContext, material: KeyMaterial, *, where: str = "") -> None:
    """Load a key and its chain from memory (OpenSSL reads files only: an anonymous in-memory
    file stands in, so that a key never touches the disk unencrypted)."""
    if b"PRIVATE KEY-----" not in material.key_pem:
        raise ConfigError(f"{material.source} holds no PEM private key{where}")
    encrypted = b"ENCRYPTED" in material.key_pem
    if encrypted and not material.password:
        raise ConfigError(f"the key of {material.source} is encrypted: set ssl.key.password{where}")
    with _memory_file(material.chain_pem) as chain_path, _memory_file(material.key_pem) as key_path:
        try:
            context.load_cert_chain(chain_path, key_path, password=material.password or "")
        except ssl.SSLError as error:
            reason = (error.reason or str(error)).lower().replace("_", " ")
            hint = " (wrong ssl.key.password?)" if encrypted else ""
            raise ConfigError(
                f"the key of {material.source} does not load: {reason}{hint}{where}"
            ) from None


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        fd = memfd_create("moldau-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="moldau-tls-") as handle:  # pragma: no cover
        handle.write(data)
        handle.flush()
        yield handle.name
