"""Forwarding in an Envelope (KIP-590), without sockets: a broker's dispatcher wraps a client's
metadata change, its real `ControllerChannel` sends it to a controller's dispatcher, and the inner
handler (a spy in the controller's registry) sees the client's principal and address."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import ipaddress
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.broker.controller_channel import ControllerChannel
from moldau.broker.dispatcher import Dispatcher
from moldau.broker.envelope import envelope_request
from moldau.broker.observability.request_metrics import RequestMetrics
from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, load_handlers
from moldau.config.cluster import Voter
from moldau.metadata.acls import Authorizer
from moldau.net.connection import CloseConnection, ConnectionInfo
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

CREATE_TOPICS = {"topics": [], "timeout": 1000, "validate_only": False}
UPDATE_FEATURES = {"timeout": 1000, "feature_updates": [], "validate_only": False}
NO_TOPICS_CREATED = {"throttle_time": 0, "topics": []}


def connection(principal: str, client_host: str) -> ConnectionInfo:
    return ConnectionInfo(
        client_host=client_host,
        client_port=50_000,
        listener_name="CONTROLLER",
        security_protocol="SASL_PLAINTEXT",
        zero_copy=False,
        authenticated=True,
        principal=principal,
        state={},
    )


BROKER_CONNECTION = connection("User:broker", "127.0.0.2")


class InnerHandlers:
    """The controller's handlers of forwarded APIs, replaced by spies: each records the context
    it was called with and answers what the test says."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.contexts: list[RequestContext] = []

    def answer(self, api_key: int, outcome: Any) -> None:
        """`outcome`: a dict to answer with, an exception to raise, or a callable making either."""
        controller_handlers = load_handlers()[CONTROLLER]

        def spy(ctx: RequestContext, request: Any) -> Any:
            self.contexts.append(ctx)
            result = outcome() if callable(outcome) else outcome
            if isinstance(result, Exception):
                raise result
            return result

        spec = dataclasses.replace(controller_handlers[api_key], function=spy)
        self._monkeypatch.setitem(controller_handlers, api_key, spec)


@pytest.fixture
def inner(monkeypatch: pytest.MonkeyPatch) -> InnerHandlers:
    return InnerHandlers(monkeypatch)


# Under Kafka's authorizer, the nodes' own principal a super user (and no ACLs).
AUTHORIZER = Authorizer((), super_users=("User:broker",))
CONTROLLER_NODE = SimpleNamespace(
    node_id=1,
    authorization=SimpleNamespace(current=lambda: AUTHORIZER),
    controller=SimpleNamespace(is_active=True),
    request_metrics=RequestMetrics(),
)


async def settle(outcome: Any) -> Any:
    return await outcome if inspect.isawaitable(outcome) else outcome


async def send_envelope(
    envelope: dict[str, Any], *, sender: ConnectionInfo = BROKER_CONNECTION
) -> Any:
    """An EnvelopeRequest through the controller listener's dispatcher, its answer decoded."""
    frame = encode_request(ApiKey.ENVELOPE, 0, 11, "broker-2", envelope)[4:]
    answer = await settle(Dispatcher(CONTROLLER_NODE, CONTROLLER)(frame, sender))  # type: ignore[arg-type]
    correlation_id, response = decode_response(ApiKey.ENVELOPE, 0, answer[4:])
    assert correlation_id == 11
    return response


def client_request(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, 4242, "admin-client", body)[4:]


def envelope(inner_frame: bytes, **fields: Any) -> dict[str, Any]:
    return {
        "request_data": inner_frame,
        "request_principal": b"User:alice",
        "client_host_address": bytes([192, 0, 2, 7]),
        **fields,
    }


# --- the controller: Envelope's handler ---------------------------------------------------------


@pytest.mark.parametrize("client_host", ["192.0.2.7", "2001:db8::7"])
def test_the_inner_request_is_served_as_the_client_from_its_address(
    inner: InnerHandlers, client_host: str
) -> None:
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    address = ipaddress.ip_address(client_host).packed
    request = envelope(
        client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS), client_host_address=address
    )

    response = asyncio.run(send_envelope(request))

    assert response.error_code == ErrorCode.none
    correlation_id, created = decode_response(ApiKey.CREATE_TOPICS, 7, response.response_data)
    assert correlation_id == 4242 and created.topics == ()
    [ctx] = inner.contexts
    assert (ctx.principal, ctx.client_host) == ("User:alice", client_host)
    assert (ctx.listener_name, ctx.scope, ctx.client_id) == (
        "CONTROLLER",
        CONTROLLER,
        "admin-client",
    )
    assert (BROKER_CONNECTION.principal, BROKER_CONNECTION.client_host) == (
        "User:broker",
        "127.0.0.2",
    )


def test_an_inner_answer_given_later_is_awaited(inner: InnerHandlers) -> None:
    def later() -> Deferred:
        deferred = Deferred()
        asyncio.get_running_loop().call_later(0.01, deferred.resolve, NO_TOPICS_CREATED)
        return deferred

    inner.answer(ApiKey.CREATE_TOPICS, later)
    response = asyncio.run(
        send_envelope(envelope(client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)))
    )
    assert response.error_code == ErrorCode.none
    assert decode_response(ApiKey.CREATE_TOPICS, 7, response.response_data)[0] == 4242


def test_a_node_that_is_not_the_active_controller_answers_the_envelope_not_controller(
    inner: InnerHandlers, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    monkeypatch.setattr(CONTROLLER_NODE.controller, "is_active", False)
    response = asyncio.run(
        send_envelope(envelope(client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)))
    )
    assert response.error_code == ErrorCode.not_controller
    assert response.response_data is None
    assert inner.contexts == []  # (not served: the broker sends it to the new controller)


def test_an_inner_failure_is_answered_in_the_inner_apis_own_shape(inner: InnerHandlers) -> None:
    inner.answer(ApiKey.UPDATE_FEATURES, KafkaError(ErrorCode.not_controller))
    forwarded = envelope(client_request(ApiKey.UPDATE_FEATURES, 1, UPDATE_FEATURES))
    response = asyncio.run(send_envelope(forwarded))
    assert response.error_code == ErrorCode.none
    _, answer = decode_response(ApiKey.UPDATE_FEATURES, 1, response.response_data)
    assert answer.error_code == ErrorCode.not_controller


def test_an_inner_failure_that_would_close_the_clients_connection_is_unknown_server_error(
    inner: InnerHandlers,
) -> None:
    """CreateTopics has no top-level error code: a failing handler closes a client's connection,
    and the controller's connection to the broker stays."""
    inner.answer(ApiKey.CREATE_TOPICS, RuntimeError("a handler bug"))
    response = asyncio.run(
        send_envelope(envelope(client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)))
    )
    assert response.error_code == ErrorCode.unknown_server_error
    assert response.response_data is None


def test_an_envelope_from_a_sender_without_cluster_action_is_cluster_authorization_failed(
    inner: InnerHandlers,
) -> None:
    """A client that reaches a controller listener cannot speak for another principal."""
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    forwarded = envelope(
        client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS), request_principal=b"User:admin"
    )
    response = asyncio.run(send_envelope(forwarded, sender=connection("User:mallory", "10.0.0.9")))
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert inner.contexts == []


@pytest.mark.parametrize(
    "principal",
    [b"alice", b":alice", b"User\xff:alice", None],
    ids=["no-type", "empty-type", "not-utf8", "null"],
)
def test_a_principal_that_is_not_utf8_type_and_name_is_principal_deserialization_failure(
    inner: InnerHandlers, principal: bytes | None
) -> None:
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    forwarded = envelope(
        client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS), request_principal=principal
    )
    response = asyncio.run(send_envelope(forwarded))
    assert response.error_code == ErrorCode.principal_deserialization_failure == 97
    assert inner.contexts == []


@pytest.mark.parametrize("address", [b"", bytes(5), bytes(15)])
def test_a_client_address_of_neither_4_nor_16_bytes_is_invalid_request(address: bytes) -> None:
    forwarded = envelope(
        client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS), client_host_address=address
    )
    assert asyncio.run(send_envelope(forwarded)).error_code == ErrorCode.invalid_request


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (ApiKey.METADATA, 12, {"topics": None}),  # served by brokers, never forwarded
        (ApiKey.BROKER_HEARTBEAT, 1, {"broker_id": 2, "broker_epoch": 1}),  # a broker's own
        (ApiKey.ENVELOPE, 0, envelope(b"")),  # an envelope in an envelope
    ],
    ids=["metadata", "broker-heartbeat", "envelope"],
)
def test_an_inner_api_that_is_not_forwarded_is_invalid_request(
    api_key: int, version: int, body: dict[str, Any]
) -> None:
    forwarded = envelope(client_request(api_key, version, body))
    assert asyncio.run(send_envelope(forwarded)).error_code == ErrorCode.invalid_request


def test_an_unknown_inner_api_is_invalid_request() -> None:
    unknown = (9999).to_bytes(2, "big") + client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)[2:]
    assert asyncio.run(send_envelope(envelope(unknown))).error_code == ErrorCode.invalid_request


WHOLE = client_request(ApiKey.CREATE_TOPICS, 7, {**CREATE_TOPICS, "topics": [{"name": "t"}]})
MALFORMED = {
    "empty": b"",
    "short-header": WHOLE[:5],
    "truncated-body": WHOLE[:-3],
    "version-not-served": WHOLE[:2] + (99).to_bytes(2, "big") + WHOLE[4:],
}


@pytest.mark.parametrize("frame", MALFORMED.values(), ids=MALFORMED.keys())
def test_an_inner_request_that_does_not_parse_is_unsupported_version(
    inner: InnerHandlers, frame: bytes
) -> None:
    """As Kafka's EnvelopeUtils: UNSUPPORTED_VERSION tells a bad inner request apart from a bad
    envelope (INVALID_REQUEST)."""
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    assert asyncio.run(send_envelope(envelope(frame))).error_code == ErrorCode.unsupported_version
    assert inner.contexts == []


# --- the broker: `Dispatcher._forward` through a real `ControllerChannel` -------------------------


class LoopbackConnection:
    """The channel's connection to the active controller, answered by a controller's dispatcher
    in-process; `refusals`: envelope errors answered first, one per request."""

    is_open = True

    def __init__(self, refusals: list[ErrorCode] | None = None) -> None:
        self.refusals = list(refusals or [])
        self.envelopes: list[dict[str, Any]] = []

    async def request(self, api_key: int, body: dict[str, Any]) -> Any:
        assert api_key == ApiKey.ENVELOPE
        self.envelopes.append(body)
        if self.refusals:
            return SimpleNamespace(error_code=self.refusals.pop(0), response_data=None)
        return await send_envelope(body)

    async def close(self) -> None:
        pass


class ForwardingBroker:
    """A broker that is not the active controller: node 2, the controller is node 1."""

    def __init__(self, connection: LoopbackConnection) -> None:
        controller = SimpleNamespace(is_active=False, leader_id=1, active_changed=asyncio.Event())
        addresses = QuorumAddresses(voters=(Voter(1, "127.0.0.1", 1),))
        self.channel = ControllerChannel(controller, addresses, node_id=2, timeout_s=2.0)  # type: ignore[arg-type]

        async def connect(leader: int) -> LoopbackConnection:
            return connection

        self.channel._connect = connect  # type: ignore[method-assign,assignment]
        self.node = SimpleNamespace(
            must_forward=True,
            controller_channel=self.channel,
            client_quotas=None,
            request_metrics=RequestMetrics(),
        )

    async def request(self, frame: bytes, client: ConnectionInfo) -> bytes:
        """The client's frame through the broker listener's dispatcher; the response frame."""
        answer: bytes = await settle(Dispatcher(self.node, BROKER)(frame, client))  # type: ignore[arg-type]
        return answer


ALICE = connection("User:alice", "192.0.2.7")


def test_a_broker_forwards_a_metadata_change_as_the_client_from_its_address(
    inner: InnerHandlers,
) -> None:
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    loopback = LoopbackConnection()
    frame = client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)

    answer = asyncio.run(ForwardingBroker(loopback).request(frame, ALICE))

    assert int.from_bytes(answer[:4], "big") == len(answer) - 4
    correlation_id, created = decode_response(ApiKey.CREATE_TOPICS, 7, answer[4:])
    assert correlation_id == 4242 and created.topics == ()
    [sent] = loopback.envelopes
    assert sent == {
        "request_data": frame,
        "request_principal": b"User:alice",
        "client_host_address": bytes([192, 0, 2, 7]),
    }
    [ctx] = inner.contexts
    assert (ctx.principal, ctx.client_host) == ("User:alice", "192.0.2.7")


def test_the_envelope_names_the_principal_the_request_came_with() -> None:
    """A re-authentication between the request's arrival and its sending changes nothing."""
    loopback = LoopbackConnection()
    client = dataclasses.replace(ALICE)

    async def scenario() -> None:
        pending = Dispatcher(ForwardingBroker(loopback).node, BROKER)(  # type: ignore[arg-type]
            client_request(ApiKey.UPDATE_FEATURES, 1, UPDATE_FEATURES), client
        )
        client.principal = "User:bob"
        await pending

    asyncio.run(scenario())
    assert loopback.envelopes[0]["request_principal"] == b"User:alice"


def test_an_envelope_refused_with_not_controller_is_sent_again(inner: InnerHandlers) -> None:
    inner.answer(ApiKey.CREATE_TOPICS, NO_TOPICS_CREATED)
    loopback = LoopbackConnection(refusals=[ErrorCode.not_controller])
    frame = client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)
    answer = asyncio.run(ForwardingBroker(loopback).request(frame, ALICE))
    assert decode_response(ApiKey.CREATE_TOPICS, 7, answer[4:])[0] == 4242
    assert len(loopback.envelopes) == 2 and len(inner.contexts) == 1


@pytest.mark.parametrize(
    "refusal",
    [ErrorCode.cluster_authorization_failed, ErrorCode.principal_deserialization_failure],
)
def test_an_envelope_refused_is_answered_with_its_error_in_the_clients_api(
    refusal: ErrorCode,
) -> None:
    loopback = LoopbackConnection(refusals=[refusal])
    frame = client_request(ApiKey.UPDATE_FEATURES, 1, UPDATE_FEATURES)
    answer = asyncio.run(ForwardingBroker(loopback).request(frame, ALICE))
    correlation_id, refused = decode_response(ApiKey.UPDATE_FEATURES, 1, answer[4:])
    assert correlation_id == 4242 and refused.error_code == refusal


def test_an_envelope_refused_for_an_api_without_an_error_code_closes_the_clients_connection() -> (
    None
):
    loopback = LoopbackConnection(refusals=[ErrorCode.cluster_authorization_failed])
    frame = client_request(ApiKey.CREATE_TOPICS, 7, CREATE_TOPICS)
    with pytest.raises(CloseConnection):
        asyncio.run(ForwardingBroker(loopback).request(frame, ALICE))


def test_a_client_host_that_is_no_ip_address_is_sent_as_the_unspecified_address() -> None:
    request = envelope_request(b"frame", connection("User:alice", ""))
    assert request["client_host_address"] == bytes(4)
