"""A broker's way to the active controller (Kafka's NodeToControllerChannelManager, KIP-590).

The active controller is the metadata quorum's leader, as this node's own quorum member (voter
or observer) knows it; its address is the voter's (`QuorumAddresses`). When this node
is itself the active controller, calls run in-process. Otherwise requests go to the controller
listener of the active one: typed calls for what the broker asks for itself (registration,
heartbeats, ISR changes, producer ids, internal topics) or a controller for itself (its
registration, KIP-919), and `forward()` for clients' requests that change metadata: each in an
Envelope naming the client's principal and address (`moldau.broker.envelope`), answered with
the inner response as the controller encoded it.

A call that finds no active controller, cannot reach it, or hears NOT_CONTROLLER waits for the
quorum to name a leader and tries again, until its deadline. What keeps the broker in the
cluster (its registration, heartbeats and ISR changes) also gives up a request the moment the
quorum names another leader, and asks that one (or itself): a deposed controller may be cut off,
its packets dropped rather than refused, and a request to it would wait out its whole timeout,
while the new controller fences a broker silent for `broker.session.timeout.ms` (Kafka bounds
that wait by half the session, KAFKA-14392).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.client.connection import BrokerConnection
from moldau.config.sasl import SaslCredentials
from moldau.controller.operations import (
    AlterPartitionResult,
    BrokerHeartbeat,
    BrokerHeartbeatResult,
    BrokerRegistration,
    BrokerRegistrationResult,
    ControllerRegistration,
    CreateTopicResult,
    IsrProposal,
    NewTopic,
    ProducerIdsBlock,
)
from moldau.controller.quorum_controller import QuorumController
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.05
LEADER_WATCH_S = 0.1  # how often a request that follows the leader looks whether it moved
_NOT_CONTROLLER = int(ErrorCode.not_controller)

T = TypeVar("T")


class _LeaderMoved(Exception):
    """The quorum named another leader while a request to the previous one was pending."""


class ControllerChannel:
    def __init__(
        self,
        controller: QuorumController,
        addresses: QuorumAddresses,
        *,
        node_id: int,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self._controller = controller
        self._ssl_context = ssl_context  # the controller listener is SSL
        self._sasl = sasl  # the controller listener is SASL
        self._addresses = addresses
        self._node_id = node_id
        self.timeout_s = timeout_s
        self._connection: BrokerConnection | None = None
        self._connected_to: int | None = None

    @property
    def local_is_active(self) -> bool:
        return self._controller.is_active

    # --- what the broker asks for itself ---------------------------------------------------

    async def register_broker(
        self, registration: BrokerRegistration, *, features: list[dict[str, Any]]
    ) -> BrokerRegistrationResult:
        return await self._at_active_controller(
            lambda: self._controller.register_broker(registration),
            lambda: self._register_remotely(registration, features),
        )

    async def _register_remotely(
        self, registration: BrokerRegistration, features: list[dict[str, Any]]
    ) -> BrokerRegistrationResult:
        response = await self._call(
            ApiKey.BROKER_REGISTRATION,
            {
                "broker_id": registration.broker_id,
                "cluster_id": registration.cluster_id,
                "incarnation_id": registration.incarnation_id,
                "listeners": [
                    {
                        "name": endpoint.name,
                        "host": endpoint.host,
                        "port": endpoint.port,
                        "security_protocol": endpoint.security_protocol,
                    }
                    for endpoint in registration.endpoints
                ],
                "features": features,
                "rack": registration.rack,
                "is_migrating_zk_broker": False,
                "log_dirs": [],
                "previous_broker_epoch": -1,
            },
            follow_leader=True,
        )
        _raise_for(response.error_code, "broker registration")
        return BrokerRegistrationResult(
            broker_id=registration.broker_id, broker_epoch=int(response.broker_epoch)
        )

    async def broker_heartbeat(self, heartbeat: BrokerHeartbeat) -> BrokerHeartbeatResult:
        return await self._at_active_controller(
            lambda: self._controller.broker_heartbeat(heartbeat),
            lambda: self._heartbeat_remotely(heartbeat),
        )

    async def _heartbeat_remotely(self, heartbeat: BrokerHeartbeat) -> BrokerHeartbeatResult:
        response = await self._call(
            ApiKey.BROKER_HEARTBEAT,
            {
                "broker_id": heartbeat.broker_id,
                "broker_epoch": heartbeat.broker_epoch,
                "current_metadata_offset": heartbeat.current_metadata_offset,
                "want_fence": heartbeat.want_fence,
                "want_shut_down": heartbeat.want_shut_down,
            },
            follow_leader=True,
        )
        _raise_for(response.error_code, "broker heartbeat")
        return BrokerHeartbeatResult(
            is_caught_up=bool(response.is_caught_up),
            is_fenced=bool(response.is_fenced),
            should_shut_down=bool(response.should_shut_down),
        )

    async def register_controller(self, registration: ControllerRegistration) -> None:
        """ControllerRegistration (KIP-919) at the active controller; raises KafkaError with
        its refusal."""
        if self.local_is_active:
            await self._controller.register_controller(registration)
            return
        response = await self._call(
            ApiKey.CONTROLLER_REGISTRATION,
            {
                "controller_id": registration.controller_id,
                "incarnation_id": registration.incarnation_id,
                "zk_migration_ready": registration.zk_migration_ready,
                "listeners": [
                    {
                        "name": endpoint.name,
                        "host": endpoint.host,
                        "port": endpoint.port,
                        "security_protocol": endpoint.security_protocol,
                    }
                    for endpoint in registration.endpoints
                ],
                "features": [
                    {"name": name, "min_supported_version": low, "max_supported_version": high}
                    for name, (low, high) in registration.features.items()
                ],
            },
        )
        _raise_for(response.error_code, "controller registration")

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        if self.local_is_active:
            return await self._controller.allocate_producer_ids(broker_id, broker_epoch)
        response = await self._call(
            ApiKey.ALLOCATE_PRODUCER_IDS, {"broker_id": broker_id, "broker_epoch": broker_epoch}
        )
        _raise_for(response.error_code, "producer id allocation")
        return ProducerIdsBlock(
            assigned_broker_id=broker_id,
            first_producer_id=int(response.producer_id_start),
            size=int(response.producer_id_len),
        )

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, changes: Sequence[IsrProposal]
    ) -> list[AlterPartitionResult]:
        """A partition leader's ISR changes (AlterPartition v3, KIP-497), one result per change
        in order. Raises KafkaError when the whole request is refused (STALE_BROKER_EPOCH: this
        broker registered again; REQUEST_TIMED_OUT: no active controller answered)."""
        return await self._at_active_controller(
            lambda: self._controller.alter_partition(
                broker_id=broker_id, broker_epoch=broker_epoch, changes=changes
            ),
            lambda: self._alter_partition_remotely(broker_id, broker_epoch, changes),
        )

    async def _alter_partition_remotely(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrProposal]
    ) -> list[AlterPartitionResult]:
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for change in changes:
            topics.setdefault(change.topic_id, []).append(
                {
                    "partition_index": change.partition,
                    "leader_epoch": change.leader_epoch,
                    "new_isr_with_epochs": [
                        {"broker_id": member.broker_id, "broker_epoch": member.broker_epoch}
                        for member in change.new_isr
                    ],
                    "leader_recovery_state": change.leader_recovery_state,
                    "partition_epoch": change.partition_epoch,
                }
            )
        response = await self._call(
            ApiKey.ALTER_PARTITION,
            {
                "broker_id": broker_id,
                "broker_epoch": broker_epoch,
                "topics": [
                    {"topic_id": topic_id, "partitions": partitions}
                    for topic_id, partitions in topics.items()
                ],
            },
            follow_leader=True,
        )
        _raise_for(response.error_code, "AlterPartition")
        answered = {
            (topic.topic_id, int(partition.partition_index)): partition
            for topic in response.topics
            for partition in topic.partitions
        }
        results = []
        for change in changes:
            partition = answered.get((change.topic_id, change.partition))
            if partition is None:
                results.append(
                    AlterPartitionResult(
                        topic_id=change.topic_id,
                        partition=change.partition,
                        error_code=ErrorCode.unknown_server_error,
                        error_message="the controller did not answer for this partition",
                    )
                )
                continue
            results.append(
                AlterPartitionResult(
                    topic_id=change.topic_id,
                    partition=change.partition,
                    error_code=ErrorCode(int(partition.error_code)),
                    leader_id=int(partition.leader_id),
                    leader_epoch=int(partition.leader_epoch),
                    isr=tuple(int(b) for b in partition.isr),
                    leader_recovery_state=int(partition.leader_recovery_state),
                    partition_epoch=int(partition.partition_epoch),
                )
            )
        return results

    async def create_topics(self, topics: list[NewTopic]) -> list[CreateTopicResult]:
        if self.local_is_active:
            return await self._controller.create_topics(topics)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            response = await self._call(
                ApiKey.CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": topic.name,
                            "num_partitions": topic.num_partitions,
                            "replication_factor": topic.replication_factor,
                            "assignments": [],
                            "configs": [
                                {"name": name, "value": value}
                                for name, value in dict(topic.configs or {}).items()
                            ],
                        }
                        for topic in topics
                    ],
                    "timeout": int(self.timeout_s * 1000),
                    "validate_only": False,
                },
            )
            codes = [int(result.error_code) for result in response.topics]
            if _NOT_CONTROLLER in codes and asyncio.get_running_loop().time() < deadline:
                await self._leader_moved()
                continue
            return [
                CreateTopicResult(
                    name=result.name,
                    error_code=ErrorCode(int(result.error_code)),
                    error_message=result.error_message,
                )
                for result in response.topics
            ]

    # --- clients' requests -----------------------------------------------------------------

    async def forward(self, envelope: dict[str, Any]) -> bytes:
        """Pass a client's request to the active controller in an Envelope
        (`moldau.broker.envelope.envelope_request`); the answer inside it, response header and
        body without size prefix. Raises KafkaError with the Envelope's error (NOT_CONTROLLER
        once the deadline has passed: until then the call is retried)."""
        response = await self._call(ApiKey.ENVELOPE, envelope)
        _raise_for(response.error_code, "the forwarded request")
        if response.response_data is None:
            raise KafkaError(ErrorCode.unknown_server_error, "the controller's envelope was empty")
        answer: bytes = response.response_data
        return answer

    # --- the connection to the active controller -------------------------------------------

    async def _at_active_controller(
        self, local: Callable[[], Awaitable[T]], remote: Callable[[], Awaitable[T]]
    ) -> T:
        """`local()` while this node is the active controller, else `remote()` (its requests
        made with `follow_leader`), begun again wherever the quorum's leader moves meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            if self.local_is_active:
                return await local()
            try:
                return await remote()
            except _LeaderMoved:
                if loop.time() >= deadline:
                    raise KafkaError(
                        ErrorCode.request_timed_out,
                        f"the active controller moved on every try for {self.timeout_s:.0f} s",
                    ) from None

    async def _call(
        self, api_key: int, body: dict[str, Any], *, follow_leader: bool = False
    ) -> Any:
        """The active controller's answer to one request, the connection's failures retried
        until the deadline; with `follow_leader`, `_LeaderMoved` once the quorum names another
        leader while it waits (the caller asks again, itself perhaps)."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            response = await self._with_connection(
                lambda connection: connection.request(api_key, body), follow_leader=follow_leader
            )
            code = getattr(response, "error_code", 0)
            if int(code) == _NOT_CONTROLLER and asyncio.get_running_loop().time() < deadline:
                await self._leader_moved()
                continue
            return response

    async def _with_connection(self, call: Any, *, follow_leader: bool = False) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        last_error: Exception | None = None
        while loop.time() < deadline:
            leader = self._controller.leader_id
            if leader is None or leader not in self._addresses:
                if follow_leader and self.local_is_active:
                    raise _LeaderMoved
                await self._wait_for_leader(deadline)
                continue
            try:
                if follow_leader:
                    return await self._unless_leader_moves(leader, call)
                connection = await self._connect(leader)
                return await call(connection)
            except _LeaderMoved:
                await self._disconnect()
                raise
            except (KafkaError, OSError, ConnectionError, TimeoutError) as exc:
                last_error = exc
                await self._disconnect()
                await asyncio.sleep(RETRY_BACKOFF_S)
            except Exception as exc:  # the client's own errors (KafkaException)
                last_error = exc
                await self._disconnect()
                await asyncio.sleep(RETRY_BACKOFF_S)
        raise KafkaError(
            ErrorCode.request_timed_out,
            f"no active controller answered within {self.timeout_s:.0f} s ({last_error})",
        )

    async def _unless_leader_moves(self, leader: int, call: Any) -> Any:
        """Connect to `leader` and make `call`; raises `_LeaderMoved` as soon as the quorum
        names another leader (or this node) before it is done."""

        async def attempt() -> Any:
            return await call(await self._connect(leader))

        task = asyncio.ensure_future(attempt())
        # Its error is retrieved however this ends: it may fail just as this is cancelled.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=LEADER_WATCH_S)
                if done:
                    return task.result()
                if self._controller.leader_id != leader or self.local_is_active:
                    raise _LeaderMoved
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})  # (its connection is closed by the caller)

    async def _connect(self, leader: int) -> BrokerConnection:
        connection = self._connection
        if connection is not None and connection.is_open and self._connected_to == leader:
            return connection
        await self._disconnect()
        host, port = self._addresses[leader]
        try:
            self._connection = await BrokerConnection.open(
                host,
                port,
                node_id=leader,
                client_id=f"broker-{self._node_id}",
                connect_timeout=5.0,
                ssl_context=self._ssl_context,
                sasl=self._sasl,
            )
        except Exception:
            self._addresses.unreachable(leader, (host, port))
            raise
        self._connected_to = leader
        return self._connection

    async def _disconnect(self) -> None:
        connection, self._connection, self._connected_to = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _wait_for_leader(self, deadline: float) -> None:
        event = self._controller.active_changed
        event.clear()
        remaining = max(deadline - asyncio.get_running_loop().time(), 0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), min(remaining, 0.5))

    async def _leader_moved(self) -> None:
        await self._disconnect()
        await asyncio.sleep(RETRY_BACKOFF_S)

    async def close(self) -> None:
        await self._disconnect()


def _raise_for(code: Any, what: str) -> None:
    if int(code) != 0:
        raise KafkaError(ErrorCode(int(code)), f"{what} refused by the controller")
