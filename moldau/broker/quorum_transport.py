"""The metadata quorum's network: the `RaftTransport` of a node's `RaftDriver`.

Out: a request the core sends goes to the destination's controller listener (from the
`QuorumAddresses`: static voters, the voter set's endpoints, bootstrap servers) on a connection
kept per destination, Fetch and FetchSnapshot on a
connection of their own so that a long-polling fetch never holds up a vote behind it; the answer
comes back to the driver as the core's response, with the correlation id the core chose.
A request that fails (no connection, a timeout) is dropped: the core retries on its timers.
A leader names its own controller endpoint in its Fetch answers (`node_endpoints`) and in
BeginQuorumEpoch (`leader_endpoints`), so a replica that found the quorum through a bootstrap
server learns where the leader listens (KIP-853).

In: a quorum request arriving on this node's controller listener (`handle`) is given to the
driver under a correlation id unique to this node, and the handler waits for the answer the core
sends back with that id (a leader may hold a fetch until it has something to send).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from typing import Any

from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.broker.quorum_rpc import VERSIONS, answer_of, request_from, request_of, response_from
from moldau.client.connection import BrokerConnection
from moldau.client.errors import KafkaException
from moldau.config.sasl import SaslCredentials
from moldau.protocol.api_keys import ApiKey
from moldau.raft.driver import RaftDriver
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    RaftMessage,
    RaftRequest,
    VoteResponse,
)

log = logging.getLogger(__name__)

_RESPONSES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)
_FETCHES = (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT)
# An inbound request whose answer the core never sends (it was dropped) stops waiting here.
INBOUND_TIMEOUT_S = 30.0
# How long a stopping node gives its EndQuorumEpoch requests to reach the other voters.
FAREWELL_WAIT_S = 1.0


class QuorumTransport:
    def __init__(
        self,
        addresses: QuorumAddresses,
        *,
        node_id: int,
        request_timeout_s: float = 2.0,
        fetch_wait_s: float = 0.5,
        local_endpoint: tuple[str, int] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self._addresses = addresses
        self._ssl_context = ssl_context  # the controller listener is SSL
        self._sasl = sasl  # the controller listener is SASL
        self._node_id = node_id
        self.local_endpoint = local_endpoint  # this node's controller listener
        self._request_timeout_s = request_timeout_s
        self._fetch_wait_s = fetch_wait_s
        self.driver: RaftDriver | None = None
        self._connections: dict[tuple[int, bool], BrokerConnection] = {}
        self._connecting: dict[tuple[int, bool], asyncio.Future[BrokerConnection]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # EndQuorumEpoch of a leader resigning at stop: `close` lets them reach the voters, so
        # that the next leader is elected at once rather than after a fetch timeout.
        self._farewells: set[asyncio.Task[None]] = set()
        self._inbound: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._inbound_ids = itertools.count(1)
        self._closed = False

    # --- RaftTransport ----------------------------------------------------------------------

    def send(self, destination_id: int, message: RaftMessage) -> None:
        if isinstance(message, _RESPONSES):
            waiting = self._inbound.pop(message.correlation_id, None)
            if waiting is not None and not waiting.done():
                body = answer_of(message)
                if isinstance(message, FetchResponse):
                    body["node_endpoints"] = self._node_endpoints(message.current_leader_id)
                waiting.set_result(body)
            return
        if self._closed or destination_id not in self._addresses:
            return
        task = asyncio.get_running_loop().create_task(self._request(destination_id, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if isinstance(message, EndQuorumEpochRequest):
            self._farewells.add(task)
            task.add_done_callback(self._farewells.discard)

    def _endpoint_of(self, node_id: int | None) -> tuple[str, int] | None:
        if node_id is None:
            return None
        if node_id == self._node_id:
            return self.local_endpoint
        return self._addresses.get(node_id)

    def _node_endpoints(self, leader_id: int | None) -> list[dict[str, Any]]:
        endpoint = self._endpoint_of(leader_id)
        if leader_id is None or endpoint is None:
            return []
        return [{"node_id": leader_id, "host": endpoint[0], "port": endpoint[1], "rack": None}]

    def _learn_endpoints(self, response: Any) -> None:
        for endpoint in getattr(response, "node_endpoints", None) or ():
            self._addresses.learn(int(endpoint.node_id), str(endpoint.host), int(endpoint.port))

    async def _request(self, destination_id: int, message: RaftRequest) -> None:
        api_key, body = request_of(message)
        if isinstance(message, BeginQuorumEpochRequest | EndQuorumEpochRequest):
            local = self.local_endpoint
            if local is not None:
                name = self._addresses.listener_name
                body["leader_endpoints"] = [{"name": name, "host": local[0], "port": local[1]}]
        fetch = api_key in _FETCHES
        timeout = self._request_timeout_s + (self._fetch_wait_s if fetch else 0.0)
        try:
            connection = await self._connection(destination_id, fetch)
            response = await connection.request(
                api_key, body, version=VERSIONS[api_key], timeout=timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("quorum request to node %d failed: %s", destination_id, exc)
            await self._drop(destination_id, fetch)
            return
        driver = self.driver
        if driver is None:
            return
        self._learn_endpoints(response)
        try:
            answer = response_from(api_key, message.correlation_id, response)
        except Exception as exc:
            log.warning("node %d answered a quorum request badly: %s", destination_id, exc)
            return
        driver.receive(destination_id, answer)

    async def _connection(self, destination_id: int, fetch: bool) -> BrokerConnection:
        key = (destination_id, fetch)
        connection = self._connections.get(key)
        if connection is not None and connection.is_open:
            return connection
        pending = self._connecting.get(key)
        if pending is None:
            host, port = self._addresses[destination_id]  # (checked in send)
            pending = asyncio.ensure_future(
                BrokerConnection.open(
                    host,
                    port,
                    node_id=destination_id,
                    client_id=f"raft-{self._node_id}",
                    connect_timeout=self._request_timeout_s,
                    ssl_context=self._ssl_context,
                    sasl=self._sasl,
                )
            )
            self._connecting[key] = pending
            try:
                connection = await pending
            except (OSError, TimeoutError, KafkaException):
                self._addresses.unreachable(destination_id, (host, port))
                raise
            finally:
                self._connecting.pop(key, None)
            self._connections[key] = connection
            return connection
        return await asyncio.shield(pending)

    async def _drop(self, destination_id: int, fetch: bool) -> None:
        connection = self._connections.pop((destination_id, fetch), None)
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    # --- requests arriving on the controller listener --------------------------------------

    async def handle(self, api_key: int, request: Any) -> dict[str, Any]:
        """The answer to a quorum request from another node (raises KafkaError when it is not
        about `__cluster_metadata-0`)."""
        driver = self.driver
        correlation_id = next(self._inbound_ids)
        source_id, message = request_from(api_key, correlation_id, request)
        if isinstance(message, BeginQuorumEpochRequest | EndQuorumEpochRequest):
            for endpoint in getattr(request, "leader_endpoints", None) or ():
                if endpoint.name == self._addresses.listener_name:
                    self._addresses.learn(message.leader_id, endpoint.host, int(endpoint.port))
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inbound[correlation_id] = answer
        try:
            if driver is None:
                raise ConnectionError("the metadata quorum is not running")
            driver.receive(source_id, message)
            return await asyncio.wait_for(answer, INBOUND_TIMEOUT_S)
        finally:
            self._inbound.pop(correlation_id, None)

    async def close(self) -> None:
        self._closed = True
        if self._farewells:
            await asyncio.wait(list(self._farewells), timeout=FAREWELL_WAIT_S)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for connection in list(self._connections.values()):
            with contextlib.suppress(Exception):
                await connection.close()
        self._connections.clear()
        for waiting in self._inbound.values():
            waiting.cancel()
        self._inbound.clear()
