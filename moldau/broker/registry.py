"""One handler per API key, with its versions declared beside it (as franz-go's kfake does).

A handler module registers itself with `@handler(ApiKey.X, min_version, max_version)`; ApiVersions
is built from this registry, so advertised versions can never drift from what is served. A
handler registered with `advertised=False` is served but not listed (the KIP-714 telemetry APIs,
which Kafka lists only when a telemetry plugin is configured).

Each handler serves the broker listeners, the controller listeners, or both (Kafka's
`ApiMessageType.listeners`): `@handler(..., scopes=(CONTROLLER,))`. One API key may have a
handler per scope (Fetch: partition data on brokers, the metadata log on controllers).

Handler shape: `async def handle_<api>(ctx: RequestContext, request) -> dict | Response | None`
(or a plain `def`). `request` is kio's decoded dataclass for the version that arrived: read fields
that not every version has with `getattr(request, "x", default)`. The returned dict uses the newest
version's field names; the adapter builds the response of the request's version. Return `None` to
send no response (Produce with acks=0). Return a `Response` for bodies made of raw chunks (Fetch),
or a `moldau.net.deferred.Deferred` to answer later by callback (acks=all Produce, a Fetch
waiting for data).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.controller import QuorumController
from moldau.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType, all_operations
from moldau.net.connection import ConnectionInfo
from moldau.protocol.adapter import RequestHeader
from moldau.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from moldau.broker.quotas import ClientQuota
    from moldau.broker.services import BrokerServices

HandlerResult = Any  # dict | Response | None
HandlerFunction = Callable[["RequestContext", Any], HandlerResult | Awaitable[HandlerResult]]


BROKER = "broker"
CONTROLLER = "controller"
Scope = str


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    function: HandlerFunction
    # Versions advertised in ApiVersions but refused when used (Produce v0-2, as Kafka 4 does).
    advertised_min_version: int
    # A metadata change: a broker that is not the active controller passes it on (KIP-590).
    forward: bool = False
    # Served but left out of ApiVersions, as Kafka leaves out the telemetry APIs (KIP-714) when
    # no telemetry plugin is configured: clients only call what is listed.
    advertised: bool = True
    # Applied in order: while an answer of this API is still being applied (its handler
    # awaits before it writes, as a transactional produce does while its partition is added to
    # the transaction), the connection's later requests wait (Kafka serves a channel's requests
    # one at a time; pipelined batches of one producer must reach the log in the order sent).
    in_order: bool = False


def _local_connection() -> ConnectionInfo:
    return ConnectionInfo(
        client_host="127.0.0.1",
        client_port=0,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        zero_copy=True,
        state={},
    )


@dataclass(slots=True)
class RequestContext:
    """One request: its header, the node, and the connection it came on (shared, not copied:
    a context is built for every request)."""

    header: RequestHeader
    node: BrokerServices
    connection: ConnectionInfo = field(default_factory=_local_connection)
    scope: Scope = BROKER  # which kind of listener the request came on
    quota: ClientQuota | None = None  # the client's quotas when one applies to this request

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def client_host(self) -> str:
        return self.connection.client_host

    @property
    def client_port(self) -> int:
        return self.connection.client_port

    @property
    def controller(self) -> QuorumController:
        """This node's controller. A node that is stopping has stopped
        it before its controller listeners close: a request that arrives then is answered
        NOT_CONTROLLER, and the broker asks the controller the quorum names next."""
        controller = self.node.controller
        if controller is None:
            raise KafkaError(ErrorCode.not_controller, "this node's controller has stopped")
        return controller

    def client_description(self) -> dict[str, str]:
        """The client as client-metrics subscriptions match it (selector -> value, KIP-714):
        its client id, the software it named in ApiVersions, its address and port."""
        name, version = self.extras.get("client_software", ("", ""))
        return {  # (Kafka's ClientInformation names what a client did not say "unknown")
            "client_id": self.client_id,
            "client_software_name": name or "unknown",
            "client_software_version": version or "unknown",
            "client_source_address": self.client_host,
            "client_source_port": str(self.client_port),
        }

    @property
    def principal(self) -> str:
        return self.connection.principal

    @property
    def listener_name(self) -> str:
        return self.connection.listener_name

    @property
    def security_protocol(self) -> str:
        return self.connection.security_protocol

    @property
    def zero_copy(self) -> bool:
        return self.connection.zero_copy

    # --- authorization: every answer is True when no authorizer is configured ---------------

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal, from its host, may do `operation` to the
        resource (`moldau.metadata.acls` has the rules)."""
        authorization = self.node.authorization
        if authorization is None:
            return True
        return authorization.current().authorize(
            self.connection.principal, self.connection.client_host, operation, resource_type, name
        )

    def authorized_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` to some resource of the type (Kafka's
        `authorizeByResourceType`: an idempotent producer that may WRITE some topic)."""
        authorization = self.node.authorization
        if authorization is None:
            return True
        return authorization.current().authorize_any(
            self.connection.principal, self.connection.client_host, operation, resource_type
        )

    def authorized_cluster(self, operation: AclOperation) -> bool:
        return self.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def require_cluster(self, operation: AclOperation) -> None:
        """Raise CLUSTER_AUTHORIZATION_FAILED unless the principal may do `operation` to the
        cluster (answered in the response's top-level error code)."""
        if not self.authorized_cluster(operation):
            raise KafkaError(
                ErrorCode.cluster_authorization_failed,
                f"{self.principal} is not authorized to {operation.name} the cluster",
            )

    def require(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        code: ErrorCode,
    ) -> None:
        """Raise `code` (a *_AUTHORIZATION_FAILED) unless `authorized`."""
        if not self.authorized(operation, resource_type, name):
            raise KafkaError(
                code,
                f"{self.principal} is not authorized to {operation.name} "
                f"{resource_type.name} {name}",
            )

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The bit set of operations the principal may do to the resource; every operation
        of its type when no authorizer is configured (as Kafka reports it then)."""
        authorization = self.node.authorization
        if authorization is None:
            return all_operations(resource_type)
        return authorization.current().authorized_operations(
            self.connection.principal, self.connection.client_host, resource_type, name
        )

    @property
    def extras(self) -> dict[str, Any]:
        """Per-connection state kept between requests (e.g. the client's software name)."""
        if self.connection.state is None:
            self.connection.state = {}
        return self.connection.state


_HANDLERS: dict[Scope, dict[int, HandlerSpec]] = {BROKER: {}, CONTROLLER: {}}


def handler(
    api_key: int,
    min_version: int,
    max_version: int,
    *,
    advertised_min_version: int | None = None,
    scopes: tuple[Scope, ...] = (BROKER,),
    forward: bool = False,
    advertised: bool = True,
    in_order: bool = False,
) -> Callable[[HandlerFunction], HandlerFunction]:
    """Register the decorated function as the handler of `api_key` for these versions, on the
    listeners of `scopes`. `forward`: a change of metadata (or a read of the controller's
    state) that a broker passes on to the active controller when it is not that controller
    itself (the controller's listeners serve it too). `advertised=False`: served when called,
    but not listed in ApiVersions. `in_order`: the connection's later requests wait while an
    answer of this API is still being applied (`HandlerSpec.in_order`)."""
    if forward and CONTROLLER not in scopes:
        scopes = (*scopes, CONTROLLER)

    def register(function: HandlerFunction) -> HandlerFunction:
        spec = HandlerSpec(
            api_key=int(api_key),
            min_version=min_version,
            max_version=max_version,
            function=function,
            advertised_min_version=(
                min_version if advertised_min_version is None else advertised_min_version
            ),
            forward=forward,
            advertised=advertised,
            in_order=in_order,
        )
        for scope in scopes:
            existing = _HANDLERS[scope].get(api_key)
            if existing is not None and existing.function is not function:
                raise RuntimeError(f"two {scope} handlers registered for API key {api_key}")
            _HANDLERS[scope][api_key] = spec
        return function

    return register


def load_handlers() -> dict[Scope, dict[int, HandlerSpec]]:
    """Import every module in `moldau.broker.handlers` so their decorators run."""
    from moldau.broker import handlers

    for module in pkgutil.iter_modules(handlers.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{handlers.__name__}.{module.name}")
    return _HANDLERS


def handler_for(api_key: int, scope: Scope = BROKER) -> HandlerSpec | None:
    return _HANDLERS[scope].get(api_key)


def supported_versions(scope: Scope = BROKER) -> list[tuple[int, int, int]]:
    """(api_key, advertised min, max) for ApiVersions on `scope`'s listeners, sorted by key."""
    return sorted(
        (spec.api_key, spec.advertised_min_version, spec.max_version)
        for spec in _HANDLERS[scope].values()
        if spec.advertised
    )
