"""The composition root of one Moldau node: config, metadata quorum, logs, partitions, listeners.

`Node.start()` first serves /metrics, /health and /ready (`observability`: /ready says what
the node waits for), binds the listeners (so an ephemeral port is known before the broker
registers), opens the metadata quorum (formatting storage on first start), opens and recovers
the logs, applies the metadata image to the partitions, starts the coordinators and background
jobs, and only then starts serving. `Node.stop()` stops accepting, answers in-flight requests, stops the
background work, flushes every log and writes the clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import time
import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from moldau.broker.authorization import NodeAuthorization
from moldau.broker.client_telemetry import ClientTelemetry
from moldau.broker.client_view import controller_for_clients, listed_brokers
from moldau.broker.controller_channel import ControllerChannel
from moldau.broker.controller_registration import ControllerRegistrationManager
from moldau.broker.dispatcher import Dispatcher
from moldau.broker.internal_topics import InternalTopics
from moldau.broker.lifecycle import BrokerLifecycle
from moldau.broker.metadata_publisher import MetadataPublisher
from moldau.broker.observability.endpoints import HostedHttp
from moldau.broker.observability.request_metrics import RequestMetrics
from moldau.broker.process_tuning import tune_for_serving
from moldau.broker.producer_ids import ProducerIdManager
from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.broker.quorum_transport import QuorumTransport
from moldau.broker.quotas import ClientQuotas
from moldau.broker.registry import BROKER, CONTROLLER, load_handlers
from moldau.broker.resources import (
    check_partition_limits,
    open_segment_files,
    raise_open_files_limit,
)
from moldau.broker.schema_registry import HostedRegistry
from moldau.broker.security import NodeSecurity, connection_quotas
from moldau.broker.transaction_link import TransactionCoordinatorLink
from moldau.broker.voter_endpoints import keep_voter_endpoints_current
from moldau.clock import SYSTEM_CLOCK, Clock
from moldau.config.cluster import ClusterLayout
from moldau.config.cluster import ListenerAddress as Endpoint
from moldau.config.definitions import RACK_AWARE_SELECTOR
from moldau.config.share_groups import ShareGroupConfig
from moldau.config.values import BrokerConfig
from moldau.controller import QuorumController
from moldau.controller.feature_control import SUPPORTED_FEATURES
from moldau.controller.operations import (
    BrokerRegistration,
    ControllerRegistration,
    IsrMember,
    IsrProposal,
    NewTopic,
)
from moldau.coordinator.runtime import GroupCoordinatorRuntime
from moldau.coordinator.transaction_runtime import TransactionCoordinatorRuntime
from moldau.metadata.acls import AclBinding
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import BrokerEndpoint
from moldau.net.listener import Listener
from moldau.net.memory_pool import RequestMemoryPool
from moldau.net.turns import TurnScheduler
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.sasl.scram import ScramCredential
from moldau.rate import RateQuota
from moldau.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from moldau.replication.replica_manager import ReplicaManager
from moldau.replication.throttle import ReplicationThrottle
from moldau.share.manager import SharePartitionManager
from moldau.storage import LogConfig, LogManager, fault_injection
from moldau.storage.filesystem import OsFileSystem
from moldau.storage.log_dir_failures import LogDirState
from moldau.types import TopicPartition

log = logging.getLogger(__name__)

_NO_ACLS: Mapping[Any, AclBinding] = MappingProxyType({})
UNFENCE_REPLAY_WAIT_S = 30.0  # how long a starting broker waits to see itself live in its image
_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class Node:
    def __init__(
        self, config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK, tune_process: bool = False
    ) -> None:
        # Process-wide GC and GIL tuning only when the node owns its process (`moldau server`),
        # never when embedded in someone else's (tests, notebooks).
        self._tune_process = tune_process
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.incarnation_id = uuid.uuid4()
        self.layout = ClusterLayout.from_config(config)
        # (ConfigError: TLS or SASL cannot be set up)
        self.security = NodeSecurity.of(
            config, self.layout, scram_credentials=self.scram_credential, clock=clock
        )
        self.connection_quotas = connection_quotas(config, self.layout)  # (ConfigError)
        # (ConfigError: an authorizer Moldau does not have, or malformed super.users)
        self.authorization = NodeAuthorization.of(config, self._acls)
        self.client_quotas = ClientQuotas.of(config, clock)  # (enforced on broker listeners)
        # (ConfigError: a malformed schema.registry.listeners)
        self.schema_registry = HostedRegistry.of(config, self.layout)
        # (ConfigError: a malformed http.listeners, or https without a key)
        self.http = HostedHttp.of(config, self.layout)
        self.request_metrics = RequestMetrics()
        # What the node is doing instead of serving its clients (None: it serves them).
        self.starting: str | None = "starting"
        self.listeners: list[Listener] = []  # the broker's (clients')
        self.controller_listeners: list[Listener] = []
        pool_bytes = int(config.get("queued.max.request.bytes"))
        self._memory_pool = RequestMemoryPool(pool_bytes if pool_bytes >= 0 else None)
        # Client listeners share one budget of the loop per round; controller listeners do not.
        self._client_turns = TurnScheduler()
        self.controller: Any = None
        self.quorum_transport: QuorumTransport | None = None
        self.quorum_addresses: QuorumAddresses | None = None
        self.controller_channel: ControllerChannel | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.controller_registration: ControllerRegistrationManager | None = None
        self.replica_fetchers: ReplicaFetcherManager | None = None
        self._broker_connections: dict[int, Any] = {}
        self.log_manager: LogManager | None = None
        self.replica_manager: Any = None
        self.group_coordinator: GroupCoordinatorRuntime | None = None
        self.transaction_coordinator: TransactionCoordinatorRuntime | None = None
        self.share_partitions: SharePartitionManager | None = None
        self.share_group_config = ShareGroupConfig.from_properties(config)
        self._transaction_link = TransactionCoordinatorLink(self)
        self._publisher: MetadataPublisher | None = None
        # Called with (previous image, image) after the partitions have followed each change.
        self.metadata_listeners: list[Callable[[Any, Any], None]] = []
        self._background: list[asyncio.Task[None]] = []
        self.internal_topics = InternalTopics(self)
        self.client_telemetry = ClientTelemetry(clock)  # (KIP-714, in memory)
        self._stopped = asyncio.Event()
        self._on_stop_callbacks: list[Callable[[], Any]] = []

    @property
    def ready(self) -> bool:
        """The node serves its clients."""
        return self.starting is None

    # --- lifecycle -----------------------------------------------------------------------------

    async def start_http(self) -> list[str]:
        """Serve /metrics, /health and /ready (once; `start` does it first); their URLs.
        ConfigError when a configured listener cannot be bound."""
        await self.http.start(self)
        return self.http.urls

    async def start(self) -> None:
        check_partition_limits(self.config)
        await self.start_http()
        if self._tune_process:
            soft, hard = raise_open_files_limit()
        else:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        max_open_files = open_segment_files(self.config, soft, hard)
        load_handlers()
        layout = self.layout
        await self.security.start()  # (OAUTHBEARER key sets: fetched in the background)
        if layout.is_broker:
            for address in layout.client_listeners:
                await self._bind(
                    address, Dispatcher(self, BROKER), self.listeners, turns=self._client_turns
                )
        if layout.is_controller:
            for address in layout.controller_listeners:
                await self._bind(address, Dispatcher(self, CONTROLLER), self.controller_listeners)
        if layout.is_broker:
            self.starting = "recovering the logs"
            self.log_manager = LogManager(
                self.config.log_dirs,
                fs=fault_injection.from_environment(OsFileSystem()),
                clock=self.clock,
                default_config=self.default_log_config(),
                max_open_files=max_open_files,
                producer_id_expiration_ms=int(self.config.get("producer.id.expiration.ms")),
                move_quota=self._log_dir_move_quota(),
            )
            loop = asyncio.get_running_loop()
            self.log_manager.failures.add_listener(
                lambda log_dir, state, error: _call_soon(
                    loop, self._on_log_dir_change, log_dir, state, error
                )
            )
            await loop.run_in_executor(None, self.log_manager.startup)
            self.replica_manager = ReplicaManager(
                self.log_manager,
                node_id=self.node_id,
                clock=self.clock,
                replica_lag_time_max_ms=int(self.config.get("replica.lag.time.max.ms")),
            )
            if not layout.standalone:
                self._start_replication()
            self._publisher = MetadataPublisher(self)
            self._publisher.listeners = self.metadata_listeners
        self.starting = "joining the metadata quorum"
        if layout.standalone:
            await self._start_standalone_quorum()
        else:
            await self._join_cluster()
        if layout.is_broker:
            assert self._publisher is not None
            # The image is caught up (a standalone node replayed its whole log; a broker in a
            # cluster was unfenced after replaying past its registration): only now may the
            # publisher judge which logs on disk belong to no topic.
            self.controller.add_publisher(self._publisher.publish)
            self._publisher.publish(None, self.controller.image)
            self.controller.add_publisher(self._follow_client_quotas)
            self._follow_client_quotas(None, self.controller.image)
            self.producer_id_manager = ProducerIdManager(self._allocate_producer_ids, self.node_id)
            self.starting = "loading the coordinators"
            await self._start_coordinators()
            self._start_background_jobs()
        if self._tune_process:
            tune_for_serving()
        for listener in self.listeners:
            await listener.start_serving()
        self.starting = None
        await self.schema_registry.start(self)  # (a client of the listeners above)

    async def _bind(
        self,
        address: Endpoint,
        dispatcher: Dispatcher,
        into: list[Listener],
        *,
        turns: TurnScheduler | None = None,
    ) -> None:
        max_frame = int(self.config.get("socket.request.max.bytes"))
        idle_ms = int(self.config.get("connections.max.idle.ms"))
        request_timeout_ms = int(self.config.get("socket.request.timeout.ms"))
        listener = Listener(
            address,
            dispatcher,
            security_protocol=self.layout.security_protocols.get(address.name, address.name),
            max_frame_size=max_frame,
            idle_timeout_s=idle_ms / 1000.0 if idle_ms > 0 else None,
            request_timeout_s=request_timeout_ms / 1000.0 if request_timeout_ms > 0 else None,
            memory_pool=self._memory_pool,
            tls=self.security.listeners.get(address.name),
            require_authentication=address.name in self.security.sasl,
            quotas=self.connection_quotas,
            turns=turns,
        )
        await listener.start()
        into.append(listener)

    async def _start_standalone_quorum(self) -> None:
        """A cluster of one: the controller runs in-process and registers this broker."""
        self.controller = await QuorumController.open(
            self.config,
            clock=self.clock,
            layout=self.layout,
            registration=BrokerRegistration(
                broker_id=self.node_id,
                incarnation_id=self.incarnation_id,
                endpoints=self.advertised_endpoints(),
                is_controller=True,
            )
            if self.layout.is_broker
            else None,
        )
        self.controller.driver.on_fatal = self._halt
        for listener in self.controller_listeners:
            await listener.start_serving()
        self._register_controller(self.controller.register_controller)

    async def _join_cluster(self) -> None:
        """Follow (or take part in) the metadata quorum, then register this broker with the
        active controller and wait until it is unfenced."""
        layout = self.layout
        quorum_config = self.config
        addresses = QuorumAddresses.of(layout)
        self.quorum_addresses = addresses
        self.quorum_transport = QuorumTransport(
            addresses,
            node_id=self.node_id,
            request_timeout_s=int(quorum_config.get("controller.quorum.request.timeout.ms")) / 1000,
            local_endpoint=self._controller_endpoint(),
            ssl_context=self.security.controller,
            sasl=self.security.controller_sasl,
        )
        self.controller = await QuorumController.open(
            self.config,
            clock=self.clock,
            layout=layout,
            transport=self.quorum_transport,
            start=False,
            bootstrap_ids=addresses.bootstrap_ids,
        )
        raft_node = self.controller.driver.node
        addresses.voter_set = lambda: raft_node.voter_set
        self.quorum_transport.driver = self.controller.driver
        self.controller.driver.on_fatal = self._halt
        for listener in self.controller_listeners:
            await listener.start_serving()
        if layout.dynamic:
            log.info(
                "joining the metadata quorum (dynamic voters: %s) through %s",
                ", ".join(map(str, raft_node.voters)) or "none known yet",
                ", ".join(map(str, layout.bootstrap_servers)),
            )
        else:
            log.info(
                "joining the metadata quorum of %s as %s",
                ", ".join(map(str, layout.voters)),
                "a voter" if layout.is_voter else "an observer",
            )
        await self.controller.start()
        if layout.dynamic and layout.is_controller:
            # (stopped with the other background tasks)
            task = asyncio.get_running_loop().create_task(keep_voter_endpoints_current(self))
            self._background.append(task)
        self.controller_channel = ControllerChannel(
            self.controller,
            addresses,
            node_id=self.node_id,
            ssl_context=self.security.controller,
            sasl=self.security.controller_sasl,
        )
        self._register_controller(self.controller_channel.register_controller)
        if layout.is_broker:
            self.starting = "registering with the controller (unfenced once caught up)"
            self.lifecycle = BrokerLifecycle(
                self.controller_channel,
                broker_id=self.node_id,
                cluster_id=self.controller.cluster_id,
                incarnation_id=self.incarnation_id,
                endpoints=self.advertised_endpoints,
                rack=layout.rack,
                is_controller=layout.is_controller,
                metadata_offset=lambda: int(self.controller.metadata_offset),
                heartbeat_interval_s=int(self.config.get("broker.heartbeat.interval.ms")) / 1000,
            )
            await self.lifecycle.start()
            await self._until_listed_live()

    async def _until_listed_live(self, timeout_s: float = UNFENCE_REPLAY_WAIT_S) -> None:
        """Wait (bounded) until this broker's own image lists it live. The controller unfences
        it in a heartbeat's answer; the record that says so reaches this node's image a moment
        later, and until then its Metadata answers would leave it out of the brokers."""
        listed = asyncio.Event()

        def check(_delta: Any, image: MetadataImage) -> None:
            broker = image.brokers.get(self.node_id)
            if broker is not None and not broker.fenced:
                listed.set()

        check(None, self.controller.image)
        self.controller.add_publisher(check)
        try:
            async with asyncio.timeout(timeout_s):
                await listed.wait()
        except TimeoutError:
            log.warning(
                "broker %d is unfenced, but its metadata does not say so after %.0f s",
                self.node_id,
                timeout_s,
            )
        finally:
            self.controller.remove_publisher(check)

    def _register_controller(self, send: Callable[[ControllerRegistration], Any]) -> None:
        """A controller with a controller listener registers it with the active controller
        (KIP-919), in the background: serving does not wait for it."""
        if not self.layout.is_controller or not self.controller_listeners:
            return
        self.controller_registration = ControllerRegistrationManager(
            self.controller,
            lambda: ControllerRegistration(
                controller_id=self.node_id,
                incarnation_id=self.incarnation_id,
                endpoints=self.controller_endpoints(),
                features=SUPPORTED_FEATURES,
            ),
            send,
        )
        self.controller_registration.start()

    def _log_dir_move_quota(self) -> RateQuota:
        """replica.alter.log.dirs.io.max.bytes.per.second over its windows (read by the log
        dir mover's thread at each chunk it copies, so a change applies at once)."""
        config = self.config
        return RateQuota(
            lambda: int(config.get("replica.alter.log.dirs.io.max.bytes.per.second")),
            now=time.monotonic,
            samples=int(config.get("alter.log.dirs.replication.quota.window.num")),
            window_s=float(config.get("alter.log.dirs.replication.quota.window.size.seconds")),
        )

    def _controller_endpoint(self) -> tuple[str, int] | None:
        """Where this node's controller listener is bound (None for a broker-only node)."""
        for listener in self.controller_listeners:
            return listener.endpoint.host or "127.0.0.1", listener.bound_port
        return None

    def _start_replication(self) -> None:
        """Followers fetch from their leaders; leaders send ISR changes to the controller."""
        config = self.config
        replica_manager = self.replica_manager
        throttle = ReplicationThrottle(
            node_id=self.node_id,
            leader_rate=lambda: int(config.get("leader.replication.throttled.rate")),
            follower_rate=lambda: int(config.get("follower.replication.throttled.rate")),
            topic_config=lambda topic, name: self.metadata_image.topic_configs(topic).get(name),
            now=time.monotonic,
            samples=int(config.get("replication.quota.window.num")),
            window_s=float(config.get("replication.quota.window.size.seconds")),
        )
        replica_manager.throttle = throttle
        self.replica_fetchers = ReplicaFetcherManager(
            node_id=self.node_id,
            connect=self._connect_to_broker,
            flush=lambda tp, partition: replica_manager.wait_durable(
                tp, partition.log.log_end_offset - 1
            ),
            config=FetcherConfig(
                max_bytes=int(config.get("replica.fetch.max.bytes")),
                response_max_bytes=int(config.get("replica.fetch.response.max.bytes")),
                max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
                min_bytes=int(config.get("replica.fetch.min.bytes")),
                backoff_ms=int(config.get("replica.fetch.backoff.ms")),
            ),
            on_progress=replica_manager.fetch_purgatory.wake,  # consumers reading a follower
            throttle=throttle,
        )
        replica_manager.fetchers = self.replica_fetchers
        replica_manager.on_isr_change = self._send_isr_change
        replica_manager.active_brokers = lambda: {
            broker.broker_id for broker in self.metadata_image.active_brokers()
        }
        if config.get("replica.selector.class") == RACK_AWARE_SELECTOR:
            replica_manager.rack_of = self._rack_of
        interval_s = max(int(config.get("replica.lag.time.max.ms")) / 2000, 0.05)

        async def check_isr() -> None:
            while True:
                await asyncio.sleep(interval_s)
                replica_manager.check_isr()

        self._background.append(asyncio.get_running_loop().create_task(check_isr()))

    @property
    def transaction_link(self) -> TransactionCoordinatorLink | None:
        """How a partition leader reaches transaction coordinators (KIP-890 verification);
        None while this node runs none."""
        return self._transaction_link if self.transaction_coordinator is not None else None

    async def broker_connection(self, broker_id: int) -> Any:
        """A kept connection to another broker's inter-broker listener (transaction markers)."""
        connection = self._broker_connections.get(broker_id)
        if connection is not None and connection.is_open:
            return connection
        connection = await self._connect_to_broker(broker_id)
        self._broker_connections[broker_id] = connection
        return connection

    def forget_broker_connection(self, broker_id: int) -> None:
        connection = self._broker_connections.pop(broker_id, None)
        if connection is not None:
            self._background.append(asyncio.get_running_loop().create_task(connection.close()))

    async def _connect_to_broker(self, broker_id: int) -> Any:
        """A connection to another broker's inter-broker listener (replica fetching)."""
        from moldau.client.connection import BrokerConnection

        broker = self.metadata_image.brokers.get(broker_id)
        name = self.layout.inter_broker_listener_name or ""
        endpoint = broker.endpoint(name) if broker is not None else None
        if endpoint is None:
            raise KafkaError(
                ErrorCode.broker_not_available, f"broker {broker_id} has no {name} endpoint"
            )
        return await BrokerConnection.open(
            endpoint.host,
            endpoint.port,
            node_id=broker_id,
            client_id=f"replica-fetcher-{self.node_id}",
            connect_timeout=5.0,
            ssl_context=self.security.inter_broker,
            sasl=self.security.inter_broker_sasl,
        )

    def _rack_of(self, broker_id: int) -> str | None:
        broker = self.metadata_image.brokers.get(broker_id)
        return broker.rack if broker is not None else None

    def _send_isr_change(self, tp: TopicPartition, partition: Any, change: Any) -> None:
        """A leader's proposed ISR goes to the controller (AlterPartition); its answer settles
        it. Sent in the background: the fetch that triggered it does not wait. Each member
        goes with the broker epoch its fetches carried (KIP-903; -1 when unknown), so a
        follower that registered again since is not let in on an old incarnation's log."""
        broker_epoch = self._broker_epoch()
        followers = partition.tracker.followers
        proposal = IsrProposal(
            topic_id=partition.topic_id,
            partition=tp.partition,
            leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch,
            new_isr=[
                IsrMember(
                    broker_id=member,
                    broker_epoch=broker_epoch
                    if member == self.node_id
                    else (followers[member].broker_epoch if member in followers else -1),
                )
                for member in change.new_isr
            ],
        )

        async def send() -> None:
            settled: dict[str, Any] = {
                "isr": None,
                "leader_epoch": partition.leader_epoch,
                "partition_epoch": partition.partition_epoch,
            }
            try:
                target = self.controller_channel or self.controller
                [result] = await target.alter_partition(
                    broker_id=self.node_id, broker_epoch=broker_epoch, changes=[proposal]
                )
                if result.error_code != ErrorCode.none:
                    log.info("ISR change of %s refused: %s", tp, result.error_message)
                settled = {
                    "isr": result.isr if result.error_code == ErrorCode.none else None,
                    "leader_epoch": result.leader_epoch,
                    "partition_epoch": result.partition_epoch,
                }
            except KafkaError as error:
                log.info("ISR change of %s not made: %s", tp, error)
            self.replica_manager.isr_change_settled(tp, **settled)

        self._background.append(asyncio.get_running_loop().create_task(send()))

    def _broker_epoch(self) -> int:
        """This broker's epoch: from its lifecycle in a cluster, its in-process registration
        when standing alone (-1 before either)."""
        if self.lifecycle is not None:
            return int(self.lifecycle.broker_epoch)
        registration = getattr(self.controller, "registration", None)
        return int(registration.broker_epoch) if registration is not None else -1

    async def _allocate_producer_ids(self) -> Any:
        if self.controller_channel is None:
            return await self.controller.allocate_producer_ids(self.node_id)
        epoch = self.lifecycle.broker_epoch if self.lifecycle is not None else -1
        return await self.controller_channel.allocate_producer_ids(self.node_id, epoch)

    async def create_topics_via_controller(self, topics: list[NewTopic]) -> Any:
        """Topics this broker needs (auto-created, internal): at the active controller."""
        if self.controller_channel is None:
            return await self.controller.create_topics(topics, validate_only=False)
        return await self.controller_channel.create_topics(topics)

    @property
    def must_forward(self) -> bool:
        """Metadata changes asked of this node go to the active controller elsewhere."""
        return self.controller_channel is not None and not self.controller.is_active

    async def _start_coordinators(self) -> None:
        from moldau.broker import coordinators, share_groups

        await coordinators.start(self)
        share_groups.start(self)

    def _start_background_jobs(self) -> None:
        from moldau.broker import jobs

        self._background.extend(jobs.start(self))

    async def stop(self) -> None:
        self.starting = "shutting down"
        if not self.listeners and not self.controller_listeners and self.controller is None:
            await self.security.stop()
            await self.http.stop()
            return
        # Controlled shutdown first, while every listener still serves (as Kafka's broker does):
        # producers write here until their leaderships have moved, followers catch up with it.
        await self.schema_registry.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()  # (bounded; the quorum still answers)
            self.lifecycle = None
        if self.controller_registration is not None:
            await self.controller_registration.stop()
            self.controller_registration = None
        # Then no new connection and no new request; what is in flight is answered (bounded).
        # (Waiting for connections to fall idle instead would wait for every follower and
        # consumer that keeps fetching from here.)
        for listener in self.listeners:
            listener.stop_accepting()
            listener.stop_taking_requests()
        for listener in self.listeners:
            await listener.wait_idle(5.0)
        for callback in self._on_stop_callbacks:
            result = callback()
            if asyncio.iscoroutine(result):
                await result
        for task in self._background:
            task.cancel()
        for task in self._background:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._background.clear()
        if self._publisher is not None:
            await self._publisher.stop()
        for listener in self.listeners:
            await listener.close()
        self.listeners.clear()
        if self.replica_fetchers is not None:
            await self.replica_fetchers.close()
            self.replica_fetchers = None
        for connection in self._broker_connections.values():
            with contextlib.suppress(Exception):
                await connection.close()
        self._broker_connections.clear()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.controller is not None:
            await self.controller.stop()  # (a leader hands over with EndQuorumEpoch)
            self.controller = None
        if self.controller_channel is not None:
            await self.controller_channel.close()
            self.controller_channel = None
        if self.quorum_transport is not None:
            await self.quorum_transport.close()
            self.quorum_transport = None
        for listener in self.controller_listeners:
            await listener.close()
        self.controller_listeners.clear()
        await self.security.stop()
        if self.log_manager is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
            self.log_manager = None
        await self.http.stop()  # (last: /health answers while the node stops)
        self._stopped.set()

    def on_stop(self, callback: Callable[[], Any]) -> None:
        self._on_stop_callbacks.append(callback)

    # --- log dirs ------------------------------------------------------------------------------

    def _on_log_dir_change(self, log_dir: str, state: LogDirState, error: OSError | None) -> None:
        """On the loop, after a log dir changed state (`LogDirFailureChannel`)."""
        if self.replica_manager is None or self._stopped.is_set():
            return
        if state is LogDirState.FAILED:
            gone = self.replica_manager.handle_log_dir_failure(
                log_dir, f"log dir {log_dir} failed: {error}"
            )
            self._unload_coordinators(gone)
            assert self.log_manager is not None
            failures = self.log_manager.failures
            if all(failures.state(d) is LogDirState.FAILED for d in self.log_manager.log_dirs):
                self._halt(f"every log dir ({', '.join(self.log_manager.log_dirs)}) has failed")
        elif state is LogDirState.ONLINE and self._publisher is not None:
            self._publisher.retry_offline(log_dir)

    def _halt(self, reason: str) -> None:
        """Nothing left to serve from: a node that owns its process exits at once with status 1,
        no controlled shutdown, nothing more written (Kafka's `Exit.halt` when all log dirs have
        failed, and its fatal fault handler when the metadata quorum's thread fails); the
        controller fences it after `broker.session.timeout.ms` and its partitions fail over.
        Embedded in another process, the node only says so and serves what it can."""
        log.critical("shutting down the process: %s", reason)
        if self._tune_process:
            logging.shutdown()
            os._exit(1)

    def on_partition_hosted(self, tp: TopicPartition) -> None:
        """A log created late (it was offline) may be a coordinator partition to load."""
        runtime = self._coordinator_runtimes().get(tp.topic)
        topic = self.metadata_image.topics.get(tp.topic)
        partition = topic.partitions.get(tp.partition) if topic is not None else None
        if runtime is not None and partition is not None and partition.leader == self.node_id:
            self._background.append(
                asyncio.get_running_loop().create_task(runtime.load_partition(tp.partition))
            )

    def _coordinator_runtimes(self) -> dict[str, Any]:
        from moldau.coordinator.runtime import OFFSETS_TOPIC
        from moldau.coordinator.transaction_runtime import TRANSACTION_STATE_TOPIC

        runtimes = {
            OFFSETS_TOPIC: self.group_coordinator,
            TRANSACTION_STATE_TOPIC: self.transaction_coordinator,
        }
        return {topic: runtime for topic, runtime in runtimes.items() if runtime is not None}

    def _unload_coordinators(self, partitions: list[TopicPartition]) -> None:
        """Coordinator partitions whose log went offline stop being coordinated here."""
        runtimes = self._coordinator_runtimes()
        for tp in partitions:
            runtime = runtimes.get(tp.topic)
            if runtime is not None:
                task = asyncio.get_running_loop().create_task(
                    runtime.unload_partition(tp.partition)
                )
                self._background.append(task)

    # --- endpoints -----------------------------------------------------------------------------

    def advertised_endpoints(self) -> list[BrokerEndpoint]:
        return self._advertised(self.listeners)

    def controller_endpoints(self) -> list[BrokerEndpoint]:
        """This node's controller listeners as other nodes and admin clients reach them (its
        ControllerRegistration, KIP-919)."""
        return self._advertised(self.controller_listeners)

    def _advertised(self, listeners: list[Listener]) -> list[BrokerEndpoint]:
        advertised = {
            Endpoint.parse(text).name: Endpoint.parse(text)
            for text in (self.config.get("advertised.listeners") or [])
        }
        endpoints = []
        for listener in listeners:
            chosen = advertised.get(listener.endpoint.name)
            host = chosen.host if chosen is not None else listener.endpoint.host
            port = chosen.port if chosen is not None and chosen.port else listener.bound_port
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            endpoints.append(
                BrokerEndpoint(
                    name=listener.endpoint.name,
                    host=host,
                    port=port,
                    security_protocol=_SECURITY_PROTOCOL_IDS.get(
                        self.layout.security_protocols.get(listener.endpoint.name, "PLAINTEXT"), 0
                    ),
                )
            )
        return endpoints

    @property
    def bootstrap_controllers(self) -> str:
        """host:port of this node's first controller listener (controller-only nodes)."""
        listener = self.controller_listeners[0]
        host = listener.endpoint.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"{host}:{listener.bound_port}"

    @property
    def bootstrap_servers(self) -> str:
        first = self.advertised_endpoints()[0]
        return f"{first.host}:{first.port}"

    def broker_endpoints(self, listener_name: str) -> list[dict[str, Any]]:
        """The live brokers as clients on `listener_name` are shown them (`client_view`)."""
        return listed_brokers(
            self.metadata_image, self.node_id, self.advertised_endpoints(), listener_name
        )

    def is_broker_alive(self, broker_id: int) -> bool:
        broker = self.metadata_image.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    @property
    def controller_id(self) -> int:
        """The controller clients are told of: a live broker (`client_view`)."""
        live = [broker.broker_id for broker in self.metadata_image.live_brokers()]
        return controller_for_clients(self.node_id, live)

    # --- metadata ------------------------------------------------------------------------------

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A user's SCRAM credential from the metadata image (None before there is one)."""
        if self.controller is None:
            return None
        return self.metadata_image.scram_credentials.get((user, mechanism))

    def _acls(self) -> Mapping[Any, AclBinding]:
        """The ACLs of the metadata image (none before there is one)."""
        if self.controller is None:
            return _NO_ACLS
        acls: Mapping[Any, AclBinding] = self.metadata_image.acls
        return acls

    def _follow_client_quotas(self, _delta: Any, image: MetadataImage) -> None:
        self.client_quotas.follow(image.client_quotas)

    @property
    def metadata_image(self) -> MetadataImage:
        return self.controller.image  # type: ignore[no-any-return]

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.config.get("auto.create.topics.enable"))

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_topic_config(self.config.topic_config({}))

    def log_config_for(self, topic_configs: Any) -> LogConfig:
        from moldau.config.values import validate_topic_configs

        try:
            overrides = validate_topic_configs(dict(topic_configs))
        except ValueError:
            log.warning("ignoring invalid stored configs %s", dict(topic_configs))
            overrides = {}
        return LogConfig.from_topic_config(self.config.topic_config(overrides))

    async def auto_create_topics_for_metadata(self, names: list[str]) -> dict[str, ErrorCode]:
        """Create topics asked for in a Metadata request; map name -> error code for failures."""
        results = await self.create_topics_via_controller([NewTopic(name=name) for name in names])
        errors: dict[str, ErrorCode] = {}
        for result in results:
            if result.error_code == ErrorCode.topic_already_exists:
                continue
            if result.error_code != ErrorCode.none:
                errors[result.name] = (
                    ErrorCode.invalid_topic_exception
                    if result.error_code == ErrorCode.invalid_topic_exception
                    else ErrorCode.unknown_topic_or_partition
                )
            else:
                errors[result.name] = ErrorCode.leader_not_available
        await self.wait_for_partitions(names)
        for name in names:
            if name in self.metadata_image.topics and errors.get(name) == (
                ErrorCode.leader_not_available
            ):
                del errors[name]
        return errors

    async def wait_for_partitions(self, names: list[str], timeout_s: float = 5.0) -> bool:
        """Wait (bounded) until the logs of `names` this broker hosts are created: the
        publisher creates them in a worker thread. False if some are still waiting."""
        if self._publisher is None:
            return True
        return await self._publisher.settled(names, timeout_s)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    """`loop.call_soon_threadsafe`, or nothing once the loop is closed (a late report)."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        pass
