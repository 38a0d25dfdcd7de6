"""The client's view of a cluster: bootstrap, Metadata, one connection per broker, coordinators.

Mirrors the parts of Kafka's `Metadata` + `NetworkClient` that a small client needs: it connects to
any bootstrap server, learns brokers and partition leaders from Metadata responses, keeps one
pipelined `BrokerConnection` per node id, and finds group coordinators with FindCoordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from moldau.client.config import ClientConfig
from moldau.client.connection import BrokerConnection
from moldau.client.errors import ErrorCode, KafkaException, error_code_of
from moldau.client.sasl import sasl_credentials_of
from moldau.client.tls import ssl_context_of
from moldau.client.wrong_listener import bootstrap_failure, controller_listener_error
from moldau.protocol.api_keys import ApiKey

T = TypeVar("T")

__all__ = ["BrokerInfo", "Cluster", "ClusterMetadata", "PartitionInfo", "TopicInfo"]

COORDINATOR_GROUP: Final = 0
COORDINATOR_TRANSACTION: Final = 1
_ZERO_UUID: Final = uuid.UUID(int=0)
_COORDINATOR_MOVED: Final = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False  # (DescribeCluster v2 with fenced brokers; Metadata lists none)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)


def _metadata_from_response(response: Any) -> ClusterMetadata:
    brokers = {
        int(b.node_id): BrokerInfo(int(b.node_id), b.host, int(b.port), b.rack)
        for b in response.brokers
    }
    topics = {}
    for topic in response.topics:
        partitions = {
            int(p.partition_index): PartitionInfo(
                partition=int(p.partition_index),
                leader=int(p.leader_id),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
                offline_replicas=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                error=error_code_of(p.error_code),
            )
            for p in topic.partitions
        }
        topic_id = getattr(topic, "topic_id", None)
        topics[topic.name] = TopicInfo(
            name=topic.name,
            topic_id=None if topic_id in (None, _ZERO_UUID) else topic_id,
            partitions=dict(sorted(partitions.items())),
            is_internal=bool(getattr(topic, "is_internal", False)),
            error=error_code_of(topic.error_code),
        )
    return ClusterMetadata(
        cluster_id=getattr(response, "cluster_id", None),
        controller_id=int(getattr(response, "controller_id", -1)),
        brokers=dict(sorted(brokers.items())),
        topics=topics,
    )


class Cluster:
    """Connections and metadata shared by the admin client, producer and consumer."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.metadata = ClusterMetadata(None, -1, {})
        self._bootstrap = config.bootstrap_servers
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._bootstrap_connection: BrokerConnection | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._ssl_context = ssl_context_of(config)
        self._sasl = sasl_credentials_of(config)

    async def _open(self, host: str, port: int, node_id: int) -> BrokerConnection:
        return await BrokerConnection.open(
            host,
            port,
            node_id=node_id,
            client_id=self.config.get_str("client.id"),
            request_timeout=self.config.request_timeout,
            connect_timeout=self.config.get_int("socket.connection.setup.timeout.ms") / 1000,
            ssl_context=self._ssl_context,
            sasl=self._sasl,
            asks_why_closed=True,
        )

    async def any_connection(self) -> BrokerConnection:
        """A live connection to some broker: an open one, else a known broker, else bootstrap."""
        for connection in self._connections.values():
            if connection.is_open:
                return connection
        if self._bootstrap_connection is not None and self._bootstrap_connection.is_open:
            return self._bootstrap_connection
        for node_id in self.metadata.brokers:
            with contextlib.suppress(KafkaException):
                return await self.connection(node_id)
        failures: list[KafkaException] = []
        for host, port in self._bootstrap:
            try:
                connection = await self._open(host, port, -1)
            except KafkaException as exc:
                failures.append(exc)
                continue
            wrong = await controller_listener_error(connection)
            if wrong is not None:
                await connection.close()
                failures.append(wrong)
                continue
            self._bootstrap_connection = connection
            return connection
        raise bootstrap_failure(failures)

    async def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker `node_id`, opened on first use and reopened after a failure."""
        existing = self._connections.get(node_id)
        if existing is not None and existing.is_open:
            return existing
        task = self._connecting.get(node_id)
        if task is None:
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                await self.refresh_metadata([])
                broker = self.metadata.brokers.get(node_id)
                if broker is None:
                    raise KafkaException(
                        ErrorCode.broker_not_available, f"broker {node_id} is not in the cluster"
                    )
            task = asyncio.create_task(self._open(broker.host, broker.port, node_id))
            self._connecting[node_id] = task
            task.add_done_callback(lambda _t: self._connecting.pop(node_id, None))
        connection = await asyncio.shield(task)
        self._connections[node_id] = connection
        return connection

    async def request(self, api_key: int, data: Mapping[str, Any], **kwargs: Any) -> Any:
        """Send a request to any broker (for cluster-wide requests such as CreateTopics)."""
        connection = await self.any_connection()
        return await connection.request(api_key, data, **kwargs)

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> ClusterMetadata:
        """Fetch Metadata for `topics` (None: all topics, []: brokers only) and remember it."""
        request = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_create,
        }
        connection = await self.any_connection()
        response = await connection.request(ApiKey.METADATA, request)
        fresh = _metadata_from_response(response)
        merged_topics = dict(self.metadata.topics)
        if topics is None:
            merged_topics = {}
        merged_topics.update(fresh.topics)
        for name, info in fresh.topics.items():
            if info.error is not ErrorCode.none:
                merged_topics.pop(name, None)
        self.metadata = ClusterMetadata(
            fresh.cluster_id, fresh.controller_id, fresh.brokers, merged_topics
        )
        if connection is self._bootstrap_connection:
            self._adopt_bootstrap_connection(connection)
        return fresh

    def _adopt_bootstrap_connection(self, connection: BrokerConnection) -> None:
        for broker in self.metadata.brokers.values():
            if (broker.host, broker.port) == (connection.host, connection.port):
                if broker.node_id not in self._connections:
                    connection.node_id = broker.node_id
                    self._connections[broker.node_id] = connection
                    self._bootstrap_connection = None
                return

    async def topic(self, name: str, *, allow_auto_create: bool = False) -> TopicInfo:
        """Metadata of one topic; raises UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
        fresh = await self.refresh_metadata([name], allow_auto_create=allow_auto_create)
        info = fresh.topics.get(name)
        if info is None:
            raise KafkaException(ErrorCode.unknown_topic_or_partition, f"topic '{name}'")
        if info.error is not ErrorCode.none:
            raise KafkaException(info.error, f"topic '{name}'")
        return info

    async def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        return await self.connection(await self.leader_id(topic, partition))

    async def leader_id(self, topic: str, partition: int) -> int:
        """The partition's leader as the metadata knows it (asked for when unknown)."""
        info = self.metadata.topics.get(topic)
        if info is None or partition not in info.partitions:
            info = await self.topic(topic)
        partition_info = info.partitions.get(partition)
        if partition_info is None:
            raise KafkaException(
                ErrorCode.unknown_topic_or_partition,
                f"topic '{topic}' has no partition {partition} (it has {len(info.partitions)})",
            )
        if partition_info.leader < 0:
            raise KafkaException(ErrorCode.leader_not_available, f"{topic}-{partition}")
        return partition_info.leader

    async def retrying(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run `operation`, retrying retriable Kafka errors until `request.timeout.ms` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.request_timeout
        backoff = self.config.get_int("retry.backoff.ms") / 1000
        while True:
            try:
                return await operation()
            except KafkaException as exc:
                unreachable = exc.code is ErrorCode.network_exception
                if not exc.retriable or unreachable or loop.time() + backoff >= deadline:
                    raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def coordinator(self, key: str, key_type: int = COORDINATOR_GROUP) -> BrokerConnection:
        """The coordinator of a group (or transactional id), found with FindCoordinator."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return await self.connection(cached)
        return await self.retrying(lambda: self._find_coordinator(key, key_type))

    async def _find_coordinator(self, key: str, key_type: int) -> BrokerConnection:
        connection = await self.any_connection()
        version = connection.versions.pick(ApiKey.FIND_COORDINATOR)
        if version >= 4:
            response = await connection.request(
                ApiKey.FIND_COORDINATOR,
                {"key_type": key_type, "coordinator_keys": [key]},
                version=version,
            )
            if not response.coordinators:
                raise KafkaException(ErrorCode.coordinator_not_available, f"group '{key}'")
            answer = response.coordinators[0]
        else:
            answer = await connection.request(
                ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, version=version
            )
        error = error_code_of(answer.error_code)
        if error is not ErrorCode.none:
            raise KafkaException(error, getattr(answer, "error_message", None) or f"'{key}'")
        node_id = int(answer.node_id)
        if node_id not in self.metadata.brokers:
            broker = BrokerInfo(node_id, answer.host, int(answer.port))
            self.metadata = ClusterMetadata(
                self.metadata.cluster_id,
                self.metadata.controller_id,
                {**self.metadata.brokers, node_id: broker},
                self.metadata.topics,
            )
        self._coordinators[(key_type, key)] = node_id
        return await self.connection(node_id)

    async def coordinator_request(
        self,
        key: str,
        api_key: int,
        data: Mapping[str, Any],
        *,
        errors: Callable[[Any], Iterable[Any]] = lambda _response: (),
        **kwargs: Any,
    ) -> Any:
        """Send to the group's coordinator; when it moved or is loading, find it again and retry.
        `errors(response)` lists the response's error codes to look at."""

        async def attempt() -> Any:
            connection = await self.coordinator(key)
            try:
                response = await connection.request(api_key, data, **kwargs)
            except KafkaException:
                self.forget_coordinator(key)
                raise
            for code in errors(response):
                error = error_code_of(code)
                if error in _COORDINATOR_MOVED:
                    self.forget_coordinator(key)
                    raise KafkaException(error, f"group '{key}'")
            return response

        return await self.retrying(attempt)

    def forget_coordinator(self, key: str, key_type: int = COORDINATOR_GROUP) -> None:
        self._coordinators.pop((key_type, key), None)

    async def close(self) -> None:
        connections = list(self._connections.values())
        if self._bootstrap_connection is not None:
            connections.append(self._bootstrap_connection)
        for task in list(self._connecting.values()):
            task.cancel()
        self._connections.clear()
        self._bootstrap_connection = None
        for connection in connections:
            await connection.close()
