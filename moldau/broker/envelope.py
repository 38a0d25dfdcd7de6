"""The Envelope (key 58, KIP-590) as a Moldau broker fills it and a Moldau controller reads it.

    request_data         the client's request as it came: header and body, no size prefix
    request_principal    the client's principal, UTF-8 "Type:name" (`User:alice`, `User:ANONYMOUS`)
    client_host_address  the client's IP address: 4 bytes (IPv4) or 16 (IPv6), network order

Kafka's brokers serialize the principal as a version-prefixed DefaultPrincipalData message
(KafkaPrincipalSerde); Moldau's brokers forward only to Moldau's controllers, so the string is
enough. The controller serves the inner request on a copy of the broker's connection that has
the client's principal and host (`forwarded_connection`); as Kafka's EnvelopeUtils, a principal
it cannot read is PRINCIPAL_DESERIALIZATION_FAILURE, an address of another length INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from moldau.net.connection import ConnectionInfo
from moldau.protocol.errors import ErrorCode, KafkaError

# The address sent for a client whose host is no IP address (a peer the socket could not name):
# an authorizer's rules for a given host never match it.
_UNSPECIFIED_ADDRESS = bytes(4)


def envelope_request(request: bytes | memoryview, connection: ConnectionInfo) -> dict[str, Any]:
    """An EnvelopeRequest v0 carrying `request` (a frame without its size prefix) from the client
    on `connection`. Built when the request arrives: a re-authentication may change the
    connection's principal before it is sent."""
    return {
        "request_data": bytes(request),
        "request_principal": connection.principal.encode(),
        "client_host_address": _address_bytes(connection.client_host),
    }


def forwarded_connection(connection: ConnectionInfo, envelope: Any) -> ConnectionInfo:
    """The connection the forwarded request is served on: the broker's (`connection`), with the
    client's principal and host from `envelope` (a decoded EnvelopeRequest)."""
    return dataclasses.replace(
        connection,
        principal=_principal(envelope.request_principal),
        client_host=_client_host(envelope.client_host_address),
    )


def _address_bytes(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return _UNSPECIFIED_ADDRESS


def _principal(data: bytes | None) -> str:
    try:
        principal = (data or b"").decode()
    except UnicodeDecodeError:
        principal = ""
    principal_type, colon, _name = principal.partition(":")
    if not principal_type or not colon:
        raise KafkaError(
            ErrorCode.principal_deserialization_failure,
            f"the envelope's principal {data!r} is not UTF-8 'Type:name'",
        )
    return principal


def _client_host(data: bytes) -> str:
    if len(data) not in (4, 16):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"the envelope's client address has {len(data)} bytes, not 4 (IPv4) or 16 (IPv6)",
        )
    return str(ipaddress.ip_address(data))
