"""What the broker's handlers and services see of their node: `BrokerServices`, the seam between
the composition root (`node.Node`, which implements it) and everything it wires.

A handler reaches the partitions (`replica_manager`), the coordinators, the controller and the
metadata image through it, typed, instead of through the `Node` class, so no module of the
broker imports the composition root back (it imports them all). Members the composition root
owns for its own wiring (listeners, security, quotas, background jobs) are typed loosely here:
they are the node's, used by few.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from moldau.broker.authorization import NodeAuthorization
from moldau.broker.observability.request_metrics import RequestMetrics
from moldau.clock import Clock
from moldau.config.cluster import ClusterLayout
from moldau.config.share_groups import ShareGroupConfig
from moldau.config.values import BrokerConfig
from moldau.controller import QuorumController
from moldau.controller.operations import NewTopic
from moldau.coordinator.runtime import GroupCoordinatorRuntime
from moldau.coordinator.transaction_runtime import TransactionCoordinatorRuntime
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import BrokerEndpoint
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.scram import ScramCredential
from moldau.replication.replica_manager import ReplicaManager
from moldau.replication.transaction_verification import CoordinatorLink
from moldau.share.manager import SharePartitionManager
from moldau.storage import LogConfig, LogManager
from moldau.types import TopicPartition


class BrokerServices(Protocol):
    # --- who this node is --------------------------------------------------------------------

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def layout(self) -> ClusterLayout: ...

    @property
    def clock(self) -> Clock: ...

    # --- the cluster as this node knows it ---------------------------------------------------

    @property
    def metadata_image(self) -> MetadataImage: ...

    @property
    def controller(self) -> QuorumController | None:
        """This node's controller (None once it has stopped, or before it runs)."""
        ...

    @property
    def controller_id(self) -> int:
        """The controller clients are told of."""
        ...

    def is_broker_alive(self, broker_id: int) -> bool: ...

    def broker_endpoints(self, listener_name: str) -> list[dict[str, Any]]: ...

    def advertised_endpoints(self) -> list[BrokerEndpoint]: ...

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    # --- the data path and the coordinators --------------------------------------------------

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def log_manager(self) -> LogManager | None: ...

    # (attributes: `coordinators.start` publishes them, before they load)
    group_coordinator: GroupCoordinatorRuntime | None
    transaction_coordinator: TransactionCoordinatorRuntime | None
    # Share groups' partition side (`share_groups.start`), and the group.share.* properties.
    share_partitions: SharePartitionManager | None
    share_group_config: ShareGroupConfig

    @property
    def transaction_link(self) -> CoordinatorLink | None: ...

    def log_config_for(self, topic_configs: Any) -> LogConfig: ...

    # --- metadata changes ----------------------------------------------------------------------

    @property
    def auto_create_topics(self) -> bool: ...

    async def auto_create_topics_for_metadata(self, names: list[str]) -> dict[str, ErrorCode]: ...

    async def create_topics_via_controller(self, topics: list[NewTopic]) -> Any: ...

    async def wait_for_partitions(self, names: list[str], timeout_s: float = 5.0) -> bool: ...

    @property
    def must_forward(self) -> bool: ...

    # --- other brokers ------------------------------------------------------------------------

    async def broker_connection(self, broker_id: int) -> Any: ...

    def forget_broker_connection(self, broker_id: int) -> None: ...

    # --- how it is doing ------------------------------------------------------------------------

    @property
    def request_metrics(self) -> RequestMetrics: ...

    @property
    def starting(self) -> str | None:
        """What the node is doing instead of serving its clients (None: it serves them)."""
        ...

    # --- the node's own wiring, typed loosely ----------------------------------------------------

    @property
    def authorization(self) -> NodeAuthorization | None:
        """The authorizer's view (None: no authorizer, everything allowed)."""
        ...

    @property
    def security(self) -> Any: ...

    @property
    def client_quotas(self) -> Any: ...

    @property
    def client_telemetry(self) -> Any: ...

    @property
    def controller_channel(self) -> Any: ...

    @property
    def listeners(self) -> Any: ...

    @property
    def controller_listeners(self) -> Any: ...

    @property
    def lifecycle(self) -> Any: ...

    @property
    def quorum_transport(self) -> Any: ...

    @property
    def quorum_addresses(self) -> Any: ...

    @property
    def internal_topics(self) -> Any: ...

    @property
    def producer_id_manager(self) -> Any: ...

    @property
    def metadata_listeners(self) -> list[Callable[[Any, Any], None]]: ...

    def on_stop(self, callback: Callable[[], Any]) -> None: ...

    def on_partition_hosted(self, tp: TopicPartition) -> None: ...
