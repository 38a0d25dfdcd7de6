"""The controller on the node's event loop, as Kafka's QuorumController (KIP-631).

Every node runs one over its copy of the metadata log: voters take part in the quorum, brokers
that are not voters follow it as observers. All of them replay every committed entry into the
same image and hand `(delta, image)` to the publishers, synchronously on the loop, in commit
order. One of them is *active*: the quorum's leader, once the first entry of its own epoch is
committed and replayed (so its image holds everything committed before it). Only the active
controller decides: each operation runs `ControllerCore` to decide on records, appends them as
one entry through the `RaftDriver`, and returns once they are committed and replayed.
Operations run one at a time, so two concurrent CreateTopics of one name cannot both succeed;
on a controller that is not active they fail with NOT_CONTROLLER.

`QuorumController.open(config, clock, registration=...)` is the bootstrap the node calls: it
formats the log directories on first start (meta.properties), opens the metadata log and its
snapshots in `<metadata.log.dir or first log.dir>/__cluster_metadata-0/`, loads the newest
snapshot and replays the log after it, writes the bootstrap records of a new cluster and
registers this broker. In a cluster of several nodes the node opens it with `start=False`,
starts its controller listener, then `start()`s it: the quorum's messages must flow before
anything can commit.

Snapshots (KIP-630): every node snapshots its own image when `SnapshotGenerator` says so and
trims its log to it; a node far behind the leader's log start receives the leader's snapshot
(FetchSnapshot), which replaces its image whole (`handle_snapshot`): publishers get the new image
with a delta of what differs from the old one.

A full disk: an operation whose records would leave less than `METADATA_RESERVE_BYTES` free in
the metadata log's directory is refused with KAFKA_STORAGE_ERROR (per topic for the topic
operations) before anything is appended, and so is every write after an append failed (the
quorum's state is then ahead of its file: a restart sorts it out). At start a full disk
releases the metadata log's reserve (`metadata_reserve.py`) so the quorum can persist its
epoch, and a broker that cannot re-register keeps the registration the log already has: a node
whose disk filled up still starts and serves reads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import random
import uuid
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TypeVar

from moldau.clock import SYSTEM_CLOCK, Clock, monotonic_ms
from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig
from moldau.controller import feature_control, metadata_reserve
from moldau.controller.acl_control import AclDeletionResult, AclResult
from moldau.controller.bootstrap_metadata import (
    BootstrapMetadataError,
    read_bootstrap_metadata,
)
from moldau.controller.core import ControllerCore
from moldau.controller.feature_control import FeatureUpdate, FeatureUpdateResult
from moldau.controller.metadata_storage import (
    METADATA_RESERVE_BYTES,
    metadata_log_directory,
    open_metadata_storage,
)
from moldau.controller.operations import (
    AlterConfigsResource,
    AlterPartitionResult,
    BrokerHeartbeat,
    BrokerHeartbeatResult,
    BrokerRegistration,
    BrokerRegistrationResult,
    ClientQuotaAlteration,
    ClientQuotaResult,
    ConfigResult,
    ControllerRegistration,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteTopicResult,
    IncrementalAlterConfigsResource,
    IsrProposal,
    NewTopic,
    PartitionReassignment,
    PartitionResult,
    PartitionsIncrease,
    ProducerIdsBlock,
    ScramCredentialDeletion,
    ScramCredentialResult,
    ScramCredentialUpsertion,
    TopicPartitionsResult,
)
from moldau.controller.snapshot_generator import (
    MAX_BYTES_PROPERTY,
    MAX_INTERVAL_PROPERTY,
    SnapshotGenerator,
)
from moldau.metadata.acls import AclBinding, AclFilter
from moldau.metadata.delta import MetadataDelta, diff_images
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.serde import deserialize_record, serialize_record
from moldau.metadata.snapshot import decode_snapshot
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.driver import QuorumStateStore, RaftDriver, RaftTransport
from moldau.raft.file_log import FileReplicatedLog
from moldau.raft.log import LogEntry, OffsetAndEpoch, ReplicatedLog
from moldau.raft.meta_properties import (
    StorageFormatError,
)
from moldau.raft.node import (
    AddVoter,
    NotLeaderError,
    QuorumDescription,
    RaftNode,
    RemoveVoter,
    UpdateVoter,
)
from moldau.raft.quorum_config import PROPERTY_NAMES as QUORUM_PROPERTY_NAMES
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import FileQuorumStateStore
from moldau.raft.snapshots import SnapshotStore
from moldau.raft.voter_set import Endpoint, VoterNode

logger = logging.getLogger(__name__)

Publisher = Callable[[MetadataDelta, MetadataImage], None]
T = TypeVar("T")


# How often the active controller looks for brokers whose session ran out.
FENCE_CHECK_INTERVAL_S = 0.25
# How long stopping waits for a write in flight to commit (one a quorum without its majority
# never commits); the write's caller then gets an error.
STOP_COMMIT_WAIT_S = 5.0


def static_voter_endpoints(layout: ClusterLayout) -> dict[int, tuple[Endpoint, ...]]:
    """Where controller.quorum.voters says each static voter listens, under the first of
    controller.listener.names (what Kafka's static voter set holds)."""
    names = layout.controller_listener_names
    name = names[0] if names else "CONTROLLER"
    return {
        voter.node_id: (Endpoint(name=name, host=voter.host, port=voter.port),)
        for voter in layout.voters
    }


class QuorumController:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        log: ReplicatedLog,
        quorum_state_store: QuorumStateStore,
        cluster_id: str,
        clock: Clock = SYSTEM_CLOCK,
        executor: concurrent.futures.Executor | None = None,
        uuid_factory: Callable[[], uuid.UUID] = uuid.uuid4,
        layout: ClusterLayout | None = None,
        transport: RaftTransport | None = None,
        snapshots: SnapshotStore | None = None,
        directory_id: str | None = None,
        bootstrap_ids: tuple[int, ...] = (),
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.node_id = config.node_id
        self.layout = layout or ClusterLayout.from_config(config)
        self.clock = clock
        self._core = ControllerCore(
            config=config, image=MetadataImage.empty(cluster_id), uuid_factory=uuid_factory
        )
        self._driver = RaftDriver(
            node=RaftNode(
                node_id=self.node_id,
                voters=self.layout.voter_ids,
                config=QuorumConfig.from_properties(
                    {name: config.get(name) for name in QUORUM_PROPERTY_NAMES.values()}
                ),
                rng=random.Random(),
                cluster_id=cluster_id,
                log=log,
                snapshots=snapshots,
                directory_id=directory_id,
                bootstrap_ids=bootstrap_ids,
                voter_endpoints=static_voter_endpoints(self.layout),
            ),
            log=log,
            quorum_state_store=quorum_state_store,
            listener=self,
            clock=clock,
            executor=executor,
            transport=transport,
            snapshots=snapshots,
        )
        self._snapshot_generator: SnapshotGenerator | None = None
        if snapshots is not None:
            self._snapshot_generator = SnapshotGenerator(
                driver=self._driver,
                image=lambda: self._core.image,
                clock=clock,
                max_bytes_between_snapshots=int(config.get(MAX_BYTES_PROPERTY)),
                max_interval_ms=int(config.get(MAX_INTERVAL_PROPERTY)),
            )
        self._publishers: list[Publisher] = []
        self._lock = asyncio.Lock()
        self._inflight: asyncio.Future[int] | None = None
        self._started = False
        self._active = False
        self._leading_epoch: int | None = None  # the epoch this node leads, until it is active
        self._activation: asyncio.Task[None] | None = None
        self._fencing: asyncio.Task[None] | None = None
        self._rebalancing: asyncio.Task[None] | None = None
        self.active_changed = asyncio.Event()  # set whenever the active controller may differ
        self._directory = log.directory if isinstance(log, FileReplicatedLog) else None
        # Records `storage format` left for a new cluster (SCRAM users), read at open.
        self.bootstrap_metadata: list[MetadataRecord] = []
        self._append_failure: KafkaError | None = None
        self.registration: BrokerRegistrationResult | None = None

    @classmethod
    async def open(
        cls,
        config: BrokerConfig,
        clock: Clock = SYSTEM_CLOCK,
        *,
        registration: BrokerRegistration | None = None,
        executor: concurrent.futures.Executor | None = None,
        layout: ClusterLayout | None = None,
        transport: RaftTransport | None = None,
        start: bool = True,
        bootstrap_ids: tuple[int, ...] = (),
    ) -> QuorumController:
        """Format storage if needed, open and replay the metadata log, register the broker.

        Raises `StorageFormatError` when a log directory belongs to another cluster or node,
        or, for a node of a cluster of several, was never formatted (`moldau storage format`:
        each node must be given the cluster's id)."""
        directory = metadata_log_directory(config)
        loop = asyncio.get_running_loop()
        layout = layout or ClusterLayout.from_config(config)

        cluster_id, directory_id, log, snapshots = await loop.run_in_executor(
            executor, open_metadata_storage, config, layout, directory
        )
        try:
            bootstrap_metadata = read_bootstrap_metadata(os.path.dirname(directory))
        except BootstrapMetadataError as error:
            raise StorageFormatError(str(error)) from None
        if log.truncated_bytes:
            logger.warning(
                "truncated a torn tail of %d bytes from the metadata log in %s",
                log.truncated_bytes,
                directory,
            )
        controller = cls(
            config=config,
            log=log,
            quorum_state_store=FileQuorumStateStore(directory),
            cluster_id=cluster_id,
            clock=clock,
            executor=executor,
            layout=layout,
            transport=transport,
            snapshots=snapshots,
            directory_id=directory_id,
            bootstrap_ids=bootstrap_ids,
        )
        controller.bootstrap_metadata = bootstrap_metadata
        if start:
            await controller.start(registration=registration)
        await loop.run_in_executor(executor, controller.restore_metadata_reserve)
        return controller

    def restore_metadata_reserve(self) -> bool:
        """Write the metadata log's reserve again if it was released and there is room now
        (blocking: call it from a worker thread)."""
        if self._directory is None:
            return False
        return metadata_reserve.restore(self._directory, margin=METADATA_RESERVE_BYTES)

    def _bootstrap_records(self) -> tuple[list[MetadataRecord], None]:
        """The feature levels of a new cluster and the records `storage format` left for it
        (nothing once the cluster has a metadata.version)."""
        records = self._core.bootstrap_records()
        if records:
            records = [*records, *self.bootstrap_metadata]
        return records, None

    async def start(self, *, registration: BrokerRegistration | None = None) -> None:
        """Join the quorum and wait until something is committed and replayed (a single voter
        elects itself and replays its whole log), then, standing alone, write the bootstrap
        records of a new cluster and register `registration` in-process."""
        if self._started:
            return
        self._started = True
        await self._driver.start()
        if self.layout.standalone:
            await self._wait_active()
            await self._run(self._bootstrap_records)
            if registration is not None:
                try:
                    self.registration = await self._run(
                        lambda: self._core.register_broker(
                            registration, now_ms=monotonic_ms(self.clock), unfence=True
                        )
                    )
                except KafkaError as error:
                    if registration.broker_id not in self._core.image.brokers:
                        raise
                    logger.error(
                        "cannot register broker %d (%s): serving with its earlier registration",
                        registration.broker_id,
                        error.message,
                    )

    async def stop(self) -> None:
        if not self._started:
            return
        self._deactivate()  # writes not yet appended are refused from here on
        if self._snapshot_generator is not None:
            await self._snapshot_generator.close()
        # Not under the lock: the write holding it may never commit. Stopping the driver
        # fails it, and with it its caller.
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight], timeout=STOP_COMMIT_WAIT_S)
        await self._driver.stop()
        self._started = False

    async def _wait_active(self) -> None:
        while not self._active:
            self.active_changed.clear()
            await self.active_changed.wait()

    async def __aenter__(self) -> QuorumController:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # Reading and following the metadata.

    @property
    def image(self) -> MetadataImage:
        """The image of every committed record."""
        return self._core.image

    def describe_quorum(self) -> QuorumDescription:
        """The metadata quorum's leader, epoch, high watermark and voters (DescribeQuorum)."""
        return self._driver.node.describe()

    @property
    def is_active(self) -> bool:
        """This node is the active controller: the quorum's leader, caught up with its log."""
        return self._active

    @property
    def leader_id(self) -> int | None:
        """The quorum's leader as this node knows it (the active controller, or about to be)."""
        return self._driver.node.leader_id

    @property
    def caught_up(self) -> bool:
        """The image holds everything this node's quorum member knows to be committed (Kafka's
        metadata loader publishes from then on)."""
        return self._core.image.offset + 1 >= self._driver.node.high_watermark

    @property
    def metadata_offset(self) -> int:
        """The offset of the last record replayed into the image (-1: none)."""
        return self._core.image.offset

    @property
    def driver(self) -> RaftDriver:
        return self._driver

    @property
    def snapshot_generator(self) -> SnapshotGenerator | None:
        return self._snapshot_generator

    def add_publisher(self, publisher: Publisher) -> None:
        """Call `publisher(delta, image)` after each commit from now on (not for the image
        already there: read `image` for that)."""
        self._publishers.append(publisher)

    def remove_publisher(self, publisher: Publisher) -> None:
        self._publishers.remove(publisher)

    # Operations.

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        return await self._run(
            lambda: self._core.create_topics(topics, validate_only=validate_only),
            refuse=_refuse_each,
        )

    async def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> list[DeleteTopicResult]:
        """Delete topics given by name or topic id; results in the same order."""
        return await self._run(lambda: self._core.delete_topics(topics), refuse=_refuse_each)

    async def create_partitions(
        self, increases: Sequence[PartitionsIncrease], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        return await self._run(
            lambda: self._core.create_partitions(increases, validate_only=validate_only),
            refuse=_refuse_each,
        )

    async def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[TopicPartitionsResult]:
        """Raises KafkaError(INVALID_REQUEST) for an unknown election type."""
        return await self._run(lambda: self._core.elect_leaders(election_type, topic_partitions))

    async def alter_partition_reassignments(
        self,
        reassignments: Sequence[PartitionReassignment],
        *,
        allow_replication_factor_change: bool = True,
    ) -> list[PartitionResult]:
        return await self._run(
            lambda: self._core.alter_partition_reassignments(
                reassignments, allow_replication_factor_change=allow_replication_factor_change
            )
        )

    async def alter_client_quotas(
        self, alterations: Sequence[ClientQuotaAlteration], *, validate_only: bool = False
    ) -> list[ClientQuotaResult]:
        return await self._run(
            lambda: self._core.alter_client_quotas(alterations, validate_only=validate_only)
        )

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclResult]:
        return await self._run(lambda: self._core.create_acls(bindings))

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletionResult]:
        return await self._run(lambda: self._core.delete_acls(filters))

    async def alter_user_scram_credentials(
        self,
        deletions: Sequence[ScramCredentialDeletion],
        upsertions: Sequence[ScramCredentialUpsertion],
    ) -> list[ScramCredentialResult]:
        return await self._run(
            lambda: self._core.alter_user_scram_credentials(deletions, upsertions)
        )

    async def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False
    ) -> list[ConfigResult]:
        return await self._run(
            lambda: self._core.alter_configs(resources, validate_only=validate_only)
        )

    async def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *, validate_only: bool = False
    ) -> list[ConfigResult]:
        return await self._run(
            lambda: self._core.incremental_alter_configs(resources, validate_only=validate_only)
        )

    async def register_broker(
        self, registration: BrokerRegistration, *, unfence: bool = False
    ) -> BrokerRegistrationResult:
        return await self._run(
            lambda: self._core.register_broker(
                registration, now_ms=monotonic_ms(self.clock), unfence=unfence
            )
        )

    async def register_controller(self, registration: ControllerRegistration) -> None:
        """Write a controller's registration (KIP-919); raises KafkaError (NOT_CONTROLLER on
        a controller that is not the active one, UNSUPPORTED_VERSION)."""
        await self._run(lambda: self._core.register_controller(registration))

    async def broker_heartbeat(self, heartbeat: BrokerHeartbeat) -> BrokerHeartbeatResult:
        return await self._run(
            lambda: self._core.broker_heartbeat(heartbeat, now_ms=monotonic_ms(self.clock))
        )

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, changes: Sequence[IsrProposal]
    ) -> list[AlterPartitionResult]:
        """A partition leader's ISR changes (AlterPartition); raises KafkaError for the whole
        request (STALE_BROKER_EPOCH, NOT_CONTROLLER)."""
        return await self._run(
            lambda: self._core.alter_partition(
                broker_id=broker_id, broker_epoch=broker_epoch, changes=changes
            )
        )

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int = -1
    ) -> ProducerIdsBlock:
        return await self._run(lambda: self._core.allocate_producer_ids(broker_id, broker_epoch))

    async def update_features(
        self, updates: Sequence[FeatureUpdate], *, validate_only: bool = False
    ) -> FeatureUpdateResult:
        """UpdateFeatures, all or nothing (`feature_control`). kraft.version goes to the
        quorum's leader (this node, as the active controller): its control entry is appended
        before the other features' records and the answer waits for it to commit (Kafka's
        FeatureControlManager with its KRaftVersionAccessor)."""
        upgrade: list[asyncio.Future[int]] = []

        def decide() -> tuple[list[MetadataRecord], FeatureUpdateResult]:
            raft = self._driver.node
            records, result = feature_control.update_features(
                self._core.image,
                updates,
                validate_only=validate_only,
                kraft_version=raft.kraft_version,
                voter_ids=raft.voters,
            )
            level = next(
                (
                    u.max_version_level
                    for u in updates
                    if u.feature == feature_control.KRAFT_VERSION
                    and u.upgrade_type == feature_control.UPGRADE
                ),
                0,
            )
            if result.error_code != ErrorCode.none or level <= 0:
                return records, result
            try:
                upgrade.append(
                    self._driver.upgrade_kraft_version(level, validate_only=validate_only)
                )
            except NotLeaderError as exc:
                raise KafkaError(ErrorCode.not_controller, str(exc)) from None
            except KafkaError as refusal:
                return [], FeatureUpdateResult(
                    error_code=refusal.code, error_message=refusal.message
                )
            return records, result

        result = await self._run(decide)
        if upgrade:
            try:
                await asyncio.shield(upgrade[0])
            except NotLeaderError as exc:
                raise KafkaError(ErrorCode.not_controller, str(exc)) from None
        return result

    # The quorum's voters (KIP-853): Raft's own records, not metadata; only the quorum's leader
    # takes them.

    async def add_voter(self, voter: VoterNode, *, timeout_s: float | None) -> None:
        await self._change_voters(AddVoter(voter=voter), timeout_s)

    async def remove_voter(
        self, voter_id: int, directory_id: str | None, *, timeout_s: float
    ) -> None:
        await self._change_voters(
            RemoveVoter(voter_id=voter_id, directory_id=directory_id), timeout_s
        )

    async def update_voter(self, voter: VoterNode, *, timeout_s: float) -> None:
        await self._change_voters(UpdateVoter(voter=voter), timeout_s)

    async def _change_voters(
        self, change: AddVoter | RemoveVoter | UpdateVoter, timeout_s: float | None
    ) -> None:
        """Raises KafkaError: NOT_LEADER_OR_FOLLOWER on a node that does not lead the quorum,
        the core's reason for a refusal, REQUEST_TIMED_OUT when the change does not commit in
        time (it may still commit later). `timeout_s` None: return once appended."""
        if not self._started:
            raise RuntimeError("the controller is not running")
        try:
            future = self._driver.change_voters(change)
            if timeout_s is None:
                future.add_done_callback(lambda done: done.cancelled() or done.exception())
                return
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except NotLeaderError as exc:
            raise KafkaError(ErrorCode.not_leader_or_follower, str(exc)) from None
        except TimeoutError:
            raise KafkaError(
                ErrorCode.request_timed_out,
                f"the voter change did not commit within {timeout_s:.0f} s",
            ) from None

    async def _run(
        self,
        operation: Callable[[], tuple[list[MetadataRecord], T]],
        *,
        refuse: Callable[[T, KafkaError], T] | None = None,
    ) -> T:
        """Decide, append, wait for the commit. A write the metadata log cannot take raises
        KAFKA_STORAGE_ERROR, or answers `refuse(result, error)` when given."""
        if not self._started:
            raise RuntimeError("the controller is not running")
        async with self._lock:
            # A caller cancelled while waiting for its commit left it in flight; decide on
            # nothing until it has landed in the image.
            await self._wait_inflight()
            if not self._active:
                raise KafkaError(
                    ErrorCode.not_controller,
                    f"node {self.node_id} is not the active controller "
                    f"(the quorum's leader is {self.leader_id})",
                )
            records, result = operation()
            if records:
                serialized = [serialize_record(r) for r in records]
                refusal = self._refusal(sum(len(data) for data in serialized))
                if refusal is None:
                    try:
                        future = self._driver.append(serialized)
                    except NotLeaderError as exc:
                        raise KafkaError(ErrorCode.not_controller, str(exc)) from None
                    except OSError as error:
                        logger.error("appending to the metadata log failed: %s", error)
                        refusal = self._append_failure = KafkaError(
                            ErrorCode.kafka_storage_error,
                            f"the metadata log failed ({error}); restart the node",
                        )
                if refusal is not None:
                    if refuse is None:
                        raise refusal
                    return refuse(result, refusal)
                self._inflight = future
                try:
                    await asyncio.shield(future)
                except NotLeaderError as exc:
                    raise KafkaError(ErrorCode.not_controller, str(exc)) from None
        return result

    def _refusal(self, size: int) -> KafkaError | None:
        """Why the metadata log cannot take `size` more bytes now, or None."""
        if self._append_failure is not None:
            return self._append_failure
        if self._directory is None:
            return None
        try:
            stat = os.statvfs(self._directory)
        except OSError:
            return None
        free = stat.f_bavail * stat.f_frsize
        if free >= size + METADATA_RESERVE_BYTES:
            return None
        return KafkaError(
            ErrorCode.kafka_storage_error,
            f"No space left for the metadata log in {self._directory} ({free} bytes free).",
        )

    async def _wait_inflight(self) -> None:
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight])

    # RaftListener: called by the driver on the loop.

    def handle_commit(self, entries: Sequence[LogEntry]) -> None:
        records: list[MetadataRecord] = []
        last_offset = -1
        own_epoch_committed = False
        for entry in entries:
            last_offset = entry.last_offset
            if not entry.is_control:
                records.extend(deserialize_record(data) for data in entry.records)
            elif entry.epoch == self._leading_epoch:
                own_epoch_committed = True
        delta = self._core.replay(records, offset=last_offset)
        self._publish(delta)
        if own_epoch_committed:
            self._activate()
        if self._snapshot_generator is not None:
            self._snapshot_generator.committed(sum(entry.size_in_bytes for entry in entries))

    def handle_snapshot(self, snapshot_id: OffsetAndEpoch, contents: bytes) -> None:
        """The image becomes the snapshot's: the newest one at start, or the leader's that
        this node installed in place of its log."""
        before = self._core.image
        image = decode_snapshot(
            contents,
            cluster_id=self.cluster_id,
            offset=snapshot_id.offset - 1,
            controller_id=before.controller_id,
        )
        delta = diff_images(before, image)
        self._core.apply_delta(delta)
        logger.info(
            "loaded metadata snapshot %s (%d topics, %d brokers)",
            snapshot_id,
            len(image.topics),
            len(image.brokers),
        )
        self._publish(delta)
        if self._snapshot_generator is not None:
            self._snapshot_generator.reset()

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if self._active or self._leading_epoch is not None:
            self._deactivate()
        if leader_id == self.node_id:
            self._leading_epoch = epoch  # active once this epoch's first entry is replayed
        delta = MetadataDelta(self._core.image)
        delta.set_controller_id(leader_id if leader_id is not None else -1)
        self._core.apply_delta(delta)
        logger.info("metadata quorum leader is now %s in epoch %d", leader_id, epoch)
        self._publish(delta)
        self.active_changed.set()

    def _activate(self) -> None:
        self._leading_epoch = None
        self._active = True
        self._core.activate(now_ms=monotonic_ms(self.clock))
        logger.info("node %d is the active controller", self.node_id)
        self.active_changed.set()
        if not self.layout.standalone:  # (alone, the node's own broker is the only one)
            loop = asyncio.get_running_loop()
            self._activation = loop.create_task(self._write_bootstrap_records())
            self._fencing = loop.create_task(self._fence_expired_brokers())
            if self.config.get("auto.leader.rebalance.enable"):
                self._rebalancing = loop.create_task(self._balance_partition_leaders())

    def _deactivate(self) -> None:
        was_active = self._active
        self._active = False
        self._leading_epoch = None
        for task in (self._activation, self._fencing, self._rebalancing):
            if task is not None:
                task.cancel()
        self._activation = self._fencing = self._rebalancing = None
        if was_active:
            logger.info("node %d is no longer the active controller", self.node_id)
            self.active_changed.set()

    async def _write_bootstrap_records(self) -> None:
        with contextlib.suppress(KafkaError):
            await self._run(self._bootstrap_records)

    async def _fence_expired_brokers(self) -> None:
        """On the active controller: fence brokers whose heartbeats stopped."""
        while True:
            await asyncio.sleep(FENCE_CHECK_INTERVAL_S)
            try:
                await self._run(
                    lambda: self._core.fence_expired_brokers(now_ms=monotonic_ms(self.clock))
                )
            except KafkaError:
                return  # no longer active: the next active controller takes over
            except Exception:
                logger.exception("fencing expired brokers failed")

    async def _balance_partition_leaders(self) -> None:
        """On the active controller: preferred replicas back in the lead, every
        `leader.imbalance.check.interval.seconds`."""
        interval_s = int(self.config.get("leader.imbalance.check.interval.seconds"))
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._run(self._core.balance_partition_leaders)
            except KafkaError:
                return  # no longer active
            except Exception:
                logger.exception("balancing partition leaders failed")

    def _publish(self, delta: MetadataDelta) -> None:
        image = self._core.image
        for publisher in list(self._publishers):
            try:
                publisher(delta, image)
            except Exception:
                logger.exception("metadata publisher %r failed", publisher)


def _refuse_each(results: list[T], error: KafkaError) -> list[T]:
    """`results` with every success turned into `error` (nothing was written)."""
    return [
        dataclasses.replace(result, error_code=error.code, error_message=error.message)  # type: ignore[type-var]
        if getattr(result, "error_code", None) == ErrorCode.none
        else result
        for result in results
    ]
