"""`max.connections.per.ip` and its overrides against a real `moldau server`: a connection
beyond the address's limit is closed at once, the others are served, and a slot freed is
taken again."""

from __future__ import annotations

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .conftest import MoldauServer, ServerFactory
from .test_sasl_wire import closed
from .test_tls_listeners import listener_port, log_lines, poll_until
from .wire import Connection

LIMIT = 3


@pytest.fixture(scope="module")
def server(module_server_factory: ServerFactory) -> MoldauServer:
    # 0 for everyone else: only the override lets loopback in, as Kafka allows.
    return module_server_factory(
        **{
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": f"localhost:{LIMIT}",
        }
    )


def served(connection: Connection) -> bool:
    answer = connection.request(ApiKey.API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"
    })  # fmt: skip
    return bool(answer.error_code == ErrorCode.none)


def test_a_connection_beyond_the_limit_is_closed_and_a_freed_slot_is_taken(
    server: MoldauServer,
) -> None:
    port = listener_port(server, "PLAINTEXT")
    held = [Connection("127.0.0.1", port, timeout=5) for _ in range(LIMIT)]
    try:
        assert all(served(connection) for connection in held)
        extra = Connection("127.0.0.1", port, timeout=5)
        assert closed(extra)
        poll_until(lambda: log_lines(server, "refused the connection from 127.0.0.1"), "a log line")
        held.pop().__exit__(None, None, None)

        def admitted() -> bool:
            attempt = Connection("127.0.0.1", port, timeout=5)
            try:
                ok = served(attempt)
            except (ConnectionError, OSError, AssertionError):
                attempt.__exit__(None, None, None)
                return False
            held.append(attempt)
            return ok

        poll_until(admitted, "a connection in the freed slot")
        assert all(served(connection) for connection in held)
    finally:
        for connection in held:
            connection.__exit__(None, None, None)
