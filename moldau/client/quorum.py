"""The metadata quorum and the cluster's features as an admin client sees them (Kafka's
`Admin.describeMetadataQuorum`, `describeFeatures`, `updateFeatures`, and the controller
endpoints of KIP-919).

DescribeQuorum goes to any broker (which passes it on to the active controller) or, given
controller addresses (`--bootstrap-controller`), to the quorum's leader found with
DescribeCluster(endpoint_type=2) on a controller listener. AddRaftVoter and RemoveRaftVoter
(KIP-853, `add_controller`/`remove_controller`) go to the quorum's leader found the same way. Lag is Kafka's: the leader's log end
offset minus the replica's. Features come from ApiVersions (v3+), as Kafka has no
DescribeFeatures API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moldau.client.cluster import BrokerInfo, Cluster
from moldau.client.config import ClientConfig, parse_bootstrap_servers
from moldau.client.connection import BrokerConnection
from moldau.client.errors import ErrorCode, KafkaException, check_error
from moldau.client.sasl import sasl_credentials_of
from moldau.client.tls import ssl_context_of
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.uuids import uuid_from_text, uuid_to_text

__all__ = [
    "ControllerInfo",
    "ControllerListener",
    "FeatureMetadata",
    "QuorumInfo",
    "QuorumReplica",
    "add_controller",
    "describe_controllers",
    "describe_features",
    "describe_quorum",
    "remove_controller",
    "update_features",
    "update_features_on_controllers",
]

METADATA_TOPIC = "__cluster_metadata"
_QUORUM_REQUEST = {
    "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]
}
_CONTROLLER_ENDPOINTS = 2
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    replica_id: int
    log_end_offset: int
    lag: int  # the leader's log end offset minus this one's
    last_fetch_timestamp: int  # ms since the epoch; -1 when unknown
    last_caught_up_timestamp: int
    directory_id: str | None = None  # its metadata log directory (dynamic voters, KIP-853)


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]
    endpoints: Mapping[int, str]  # voter id -> host:port of its controller listener

    @property
    def max_follower_lag(self) -> int:
        return max((r.lag for r in self.voters if r.replica_id != self.leader_id), default=0)


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    finalized: Mapping[str, int]
    finalized_epoch: int | None
    supported: Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """What the controller listeners say: DescribeCluster with endpoint type 2, then
    DescribeQuorum and ApiVersions' features from the quorum's leader."""

    cluster_id: str
    leader_id: int
    controllers: Mapping[int, BrokerInfo]
    quorum: QuorumInfo
    features: FeatureMetadata


def _quorum_info(response: Any) -> QuorumInfo:
    check_error(response.error_code, response.error_message, context="DescribeQuorum")
    [topic] = response.topics
    [partition] = topic.partitions
    check_error(partition.error_code, partition.error_message, context="DescribeQuorum")
    voters = list(partition.current_voters)
    leader_end = max(
        (int(r.log_end_offset) for r in voters if r.replica_id == partition.leader_id),
        default=int(partition.high_watermark),
    )

    def replicas(states: Any) -> tuple[QuorumReplica, ...]:
        return tuple(
            QuorumReplica(
                replica_id=int(state.replica_id),
                log_end_offset=int(state.log_end_offset),
                lag=max(0, leader_end - int(state.log_end_offset)),
                last_fetch_timestamp=int(getattr(state, "last_fetch_timestamp", -1)),
                last_caught_up_timestamp=int(getattr(state, "last_caught_up_timestamp", -1)),
                directory_id=uuid_to_text(getattr(state, "replica_directory_id", None)),
            )
            for state in states
        )

    endpoints = {
        int(node.node_id): f"{node.listeners[0].host}:{node.listeners[0].port}"
        for node in getattr(response, "nodes", ())
        if node.listeners
    }
    return QuorumInfo(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        voters=replicas(voters),
        observers=replicas(partition.observers),
        endpoints=endpoints,
    )


async def describe_quorum(cluster: Cluster) -> QuorumInfo:
    """DescribeQuorum through any broker (retried while the quorum elects a leader)."""

    async def attempt() -> QuorumInfo:
        return _quorum_info(await cluster.request(ApiKey.DESCRIBE_QUORUM, _QUORUM_REQUEST))

    return await cluster.retrying(attempt)


async def describe_controllers(config: ClientConfig, bootstrap_controllers: str) -> ControllerInfo:
    """The controllers, the quorum and the features, asked of controller listeners only
    (KIP-919)."""
    cluster_id, leader, controllers = await _find_quorum_leader(config, bootstrap_controllers)
    connection = await _open(config, leader.host, leader.port)
    try:
        quorum = _quorum_info(await connection.request(ApiKey.DESCRIBE_QUORUM, _QUORUM_REQUEST))
        features = await describe_features(connection)
    finally:
        await connection.close()
    return ControllerInfo(cluster_id, leader.node_id, controllers, quorum, features)


@dataclass(frozen=True, slots=True)
class ControllerListener:
    """A listener of a controller to add (AddRaftVoter's Listener)."""

    name: str
    host: str
    port: int


async def add_controller(
    config: ClientConfig,
    bootstrap_controllers: str,
    *,
    voter_id: int,
    directory_id: str,
    listeners: Sequence[ControllerListener],
    timeout_ms: int = 30000,
) -> None:
    """Make the controller `voter_id` (which follows the log already) a voter (AddRaftVoter,
    KIP-853), through the quorum's leader; raises KafkaException with the leader's reason."""
    body = {
        "cluster_id": None,
        "timeout": timeout_ms,
        "voter_id": voter_id,
        "voter_directory_id": uuid_from_text(directory_id),
        "listeners": [{"name": x.name, "host": x.host, "port": x.port} for x in listeners],
        "ack_when_committed": True,
    }
    await _ask_quorum_leader(config, bootstrap_controllers, ApiKey.ADD_RAFT_VOTER, body)


async def remove_controller(
    config: ClientConfig,
    bootstrap_controllers: str,
    *,
    voter_id: int,
    directory_id: str | None,
) -> None:
    """Remove the voter `voter_id` with that directory (RemoveRaftVoter, KIP-853)."""
    body = {
        "cluster_id": None,
        "voter_id": voter_id,
        "voter_directory_id": uuid_from_text(directory_id),
    }
    await _ask_quorum_leader(config, bootstrap_controllers, ApiKey.REMOVE_RAFT_VOTER, body)


async def _ask_quorum_leader(
    config: ClientConfig, bootstrap_controllers: str, api_key: int, body: dict[str, Any]
) -> Any:
    """Send a request to the quorum's leader, found again while it answers
    NOT_LEADER_OR_FOLLOWER or NOT_CONTROLLER (an election in between, or a leader not yet
    active)."""
    for attempt in range(10):
        _, leader, _ = await _find_quorum_leader(config, bootstrap_controllers)
        connection = await _open(config, leader.host, leader.port)
        try:
            response = await connection.request(api_key, body)
        finally:
            await connection.close()
        code = int(response.error_code)
        if code in (ErrorCode.not_leader_or_follower, ErrorCode.not_controller) and attempt < 9:
            await asyncio.sleep(0.1 * attempt)
            continue
        check_error(response.error_code, response.error_message, context=ApiKey(api_key).name)
        return response
    raise AssertionError("unreachable")


async def _find_quorum_leader(
    config: ClientConfig, bootstrap_controllers: str
) -> tuple[str, BrokerInfo, dict[int, BrokerInfo]]:
    """(cluster id, the quorum's leader, the controllers) from the first controller listener
    that answers DescribeCluster with endpoint type 2. The controllers are those registered
    (KIP-919): a leader elected or started a moment ago may not be among them yet, which is
    asked again (every 0.1 s, within the request timeout)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.request_timeout
    while True:
        cluster_id, controller_id, controllers = await _describe_controllers(
            config, bootstrap_controllers
        )
        leader = controllers.get(controller_id)
        if leader is not None:
            return cluster_id, leader, controllers
        if loop.time() >= deadline:
            raise KafkaException(
                ErrorCode.not_leader_or_follower,
                "the quorum has no leader among the registered controllers",
            )
        await asyncio.sleep(0.1)


async def _describe_controllers(
    config: ClientConfig, bootstrap_controllers: str
) -> tuple[str, int, dict[int, BrokerInfo]]:
    errors: list[str] = []
    for host, port in parse_bootstrap_servers(bootstrap_controllers):
        try:
            connection = await _open(config, host, port)
        except KafkaException as exc:
            errors.append(exc.message or str(exc))
            continue
        try:
            response = await connection.request(
                ApiKey.DESCRIBE_CLUSTER,
                {"include_cluster_authorized_operations": False, "endpoint_type": 2},
            )
        finally:
            await connection.close()
        check_error(response.error_code, response.error_message, context="DescribeCluster")
        controllers = {
            int(b.broker_id): BrokerInfo(int(b.broker_id), b.host, int(b.port), b.rack)
            for b in response.brokers
        }
        return response.cluster_id, int(response.controller_id), controllers
    raise KafkaException(
        ErrorCode.network_exception, f"no controller reachable: {', '.join(errors)}"
    )


async def _open(config: ClientConfig, host: str, port: int) -> BrokerConnection:
    return await BrokerConnection.open(
        host,
        port,
        client_id=config.get_str("client.id"),
        request_timeout=config.request_timeout,
        connect_timeout=config.get_int("socket.connection.setup.timeout.ms") / 1000,
        ssl_context=ssl_context_of(config),
        sasl=sasl_credentials_of(config),
    )


async def describe_features(connection: BrokerConnection) -> FeatureMetadata:
    """The supported and finalized features from an ApiVersions answer (v3+)."""
    high = connection.versions.ranges.get(ApiKey.API_VERSIONS, (0, 0))[1]
    if high < 3:
        return FeatureMetadata({}, None, {})
    response = await connection.request(
        ApiKey.API_VERSIONS,
        {"client_software_name": "moldau", "client_software_version": "0.1.0"},
        version=min(high, 4),
    )
    check_error(response.error_code, context="ApiVersions")
    epoch = int(response.finalized_features_epoch)
    return FeatureMetadata(
        finalized={f.name: int(f.max_version_level) for f in response.finalized_features},
        finalized_epoch=epoch if epoch >= 0 else None,
        supported={
            f.name: (int(f.min_version), int(f.max_version)) for f in response.supported_features
        },
    )


async def update_features(
    cluster: Cluster,
    levels: Mapping[str, int],
    *,
    upgrade_type: int = UPGRADE,
    validate_only: bool = False,
) -> None:
    """Finalize `levels` (all or nothing); raises KafkaException with the controller's reason."""
    body = _update_features_request(levels, upgrade_type, validate_only)
    _check_update_features(await cluster.request(ApiKey.UPDATE_FEATURES, body))


async def update_features_on_controllers(
    config: ClientConfig,
    bootstrap_controllers: str,
    levels: Mapping[str, int],
    *,
    upgrade_type: int = UPGRADE,
    validate_only: bool = False,
) -> None:
    """`update_features` through the quorum's leader, found on controller listeners (KIP-919,
    `kafka-features --bootstrap-controller`)."""
    body = _update_features_request(levels, upgrade_type, validate_only)
    response = await _ask_quorum_leader(config, bootstrap_controllers, ApiKey.UPDATE_FEATURES, body)
    _check_update_features(response)


def _update_features_request(
    levels: Mapping[str, int], upgrade_type: int, validate_only: bool
) -> dict[str, Any]:
    updates: Sequence[dict[str, Any]] = [
        {
            "feature": name,
            "max_version_level": level,
            "upgrade_type": upgrade_type,
            "allow_downgrade": upgrade_type != UPGRADE,
        }
        for name, level in levels.items()
    ]
    return {"timeout": 60000, "feature_updates": updates, "validate_only": validate_only}


def _check_update_features(response: Any) -> None:
    check_error(response.error_code, response.error_message, context="UpdateFeatures")
    for result in getattr(response, "results", ()):
        check_error(result.error_code, result.error_message, context=result.feature)
