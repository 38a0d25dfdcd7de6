"""The client's SASL (`security.protocol=sasl_plaintext|sasl_ssl`), with librdkafka's setting
names and the Java client's JAAS form:

    sasl.mechanism      PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI, librdkafka's default,
                        and OAUTHBEARER are refused)
    sasl.username       the user ...
    sasl.password       ... and its password, or instead
    sasl.jaas.config    PlainLoginModule / ScramLoginModule required username="..." password="...";

`sasl_credentials_of(config)` is None without SASL. `authenticate(connection, credentials)` runs
SaslHandshake v1 and SaslAuthenticate (KIP-152) on a connection that has negotiated versions and
returns the session's lifetime in seconds (0: unlimited, KIP-368).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moldau.client.config import ClientConfig
from moldau.client.errors import ConfigException, ErrorCode, KafkaException
from moldau.config.jaas import JaasError, parse_jaas_config
from moldau.config.sasl import LOGIN_MODULES, SaslCredentials, check_mechanism
from moldau.config.values import ConfigError
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.sasl.plain import plain_message
from moldau.protocol.sasl.scram import ScramClient, ScramFailure

if TYPE_CHECKING:
    from moldau.client.connection import BrokerConnection

__all__ = ["authenticate", "sasl_credentials_of"]

SASL_PROTOCOLS = ("sasl_plaintext", "sasl_ssl")
_SETTINGS = ("sasl.username", "sasl.password", "sasl.jaas.config")


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
    jaas = config.get_optional_str("sasl.jaas.config")
    username = config.get_optional_str("sasl.username")
    if jaas and (username or config.get_optional_str("sasl.password")):
        raise ConfigException("give sasl.username/sasl.password or sasl.jaas.config, not both")
    if jaas:
        try:
            entry = parse_jaas_config(jaas)
        except JaasError as error:
            raise ConfigException(f"sasl.jaas.config: {error}") from None
        if entry.login_module != LOGIN_MODULES[mechanism]:
            raise ConfigException(
                f"sasl.jaas.config names {entry.login_module}; sasl.mechanism={mechanism} needs "
                f"{LOGIN_MODULES[mechanism]}"
            )
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


async def authenticate(connection: BrokerConnection, credentials: SaslCredentials) -> float:
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


async def _step(connection: BrokerConnection, token: bytes) -> Any:
    version = min(connection.versions.pick(ApiKey.SASL_AUTHENTICATE), 2)
    answer = await connection.request(
        ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=version
    )
    if answer.error_code != ErrorCode.none:
        raise KafkaException(
            answer.error_code, f"{connection.address}: {answer.error_message or 'SASL failed'}"
        )
    return answer
