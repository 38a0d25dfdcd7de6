"""The admin API handlers over the wire format of every version they declare: requests encoded
as clients send them, responses decoded as clients read them, against a real QuorumController."""

import asyncio
import dataclasses
import functools
import inspect
import uuid

import pytest

from moldau.broker.handlers.alter_configs import handle_alter_configs
from moldau.broker.handlers.broker_lifecycle import handle_broker_heartbeat
from moldau.broker.handlers.controller_registration import handle_controller_registration
from moldau.broker.handlers.create_partitions import handle_create_partitions
from moldau.broker.handlers.create_topics import handle_create_topics
from moldau.broker.handlers.delete_topics import handle_delete_topics
from moldau.broker.handlers.describe_cluster import handle_describe_cluster
from moldau.broker.handlers.describe_configs import handle_describe_configs
from moldau.broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from moldau.broker.registry import BROKER, CONTROLLER, RequestContext
from moldau.clock import ManualClock
from moldau.config.cluster import ClusterLayout
from moldau.config.values import BrokerConfig
from moldau.controller import QuorumController
from moldau.controller.operations import BrokerRegistration
from moldau.metadata.records import BrokerEndpoint
from moldau.protocol.adapter import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

E = ErrorCode


class FakeNode:
    """What the handlers read from the composition root."""

    authorization = None  # (no authorizer: everything is allowed)

    def __init__(self, controller, config):
        self.controller = controller
        self.config = config
        self.node_id = config.node_id
        self.layout = ClusterLayout.from_config(config)

    @property
    def metadata_image(self):
        return self.controller.image

    @property
    def controller_id(self):
        return self.metadata_image.controller_id

    def broker_endpoints(self, listener_name):
        return [
            {"node_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b in self.metadata_image.live_brokers()
            for e in b.endpoints[:1]
        ]

    async def wait_for_partitions(self, names, timeout_s=5.0):
        return True  # no logs here


class Cluster:
    def __init__(self, tmp_path):
        self.config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2"})
        self.loop = asyncio.new_event_loop()
        registration = BrokerRegistration(
            broker_id=1,
            incarnation_id=uuid.uuid4(),
            endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092)],
        )
        self.controller = self.loop.run_until_complete(
            QuorumController.open(self.config, ManualClock(), registration=registration)
        )
        self.node = FakeNode(self.controller, self.config)

    def call(self, function, api_key, version, body, *, scope=BROKER, listener_name=None):
        return self.loop.run_until_complete(
            self.call_async(
                function, api_key, version, body, scope=scope, listener_name=listener_name
            )
        )

    async def call_async(
        self, function, api_key, version, body, *, scope=BROKER, listener_name=None
    ):
        """The request encoded as a client sends it, the answer decoded as a client reads it."""
        frame = encode_request(api_key, version, 7, "test-client", body)[4:]
        header = decode_request_header(frame)
        request = decode_request(header, frame)
        ctx = RequestContext(header=header, node=self.node, scope=scope)
        if listener_name is not None:
            ctx.connection = dataclasses.replace(ctx.connection, listener_name=listener_name)
        result = function(ctx, request)
        if inspect.iscoroutine(result):
            result = await result
        response = encode_response(api_key, version, 7, result)
        correlation_id, decoded = decode_response(api_key, version, response[4:])
        assert correlation_id == 7
        return decoded

    def close(self):
        self.loop.run_until_complete(self.controller.stop())
        self.loop.close()


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.close()


def create_topics(cluster, version, *topics, validate_only=False):
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": -1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
            for name, partitions, configs in topics
        ],
        "timeout": 30000,
        "validate_only": validate_only,
    }
    return cluster.call(handle_create_topics, ApiKey.CREATE_TOPICS, version, body).topics


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_in_every_version(cluster, version):
    results = create_topics(
        cluster,
        version,
        ("orders", -1, {"retention.ms": "1000"}),
        ("bad/name", 1, {}),
        ("twice", 1, {}),
        ("twice", 1, {}),
    )
    assert [r.name for r in results] == ["orders", "bad/name", "twice", "twice"]
    assert [r.error_code for r in results] == [
        E.none,
        E.invalid_topic_exception,
        E.invalid_request,  # the same name twice in one request
        E.invalid_request,
    ]
    assert results[1].error_message
    ok, bad, duplicate = create_topics(
        cluster, version, ("orders", -1, {}), ("x", 1, {"no.such": "1"}), ("y", 0, {})
    )
    assert (ok.error_code, bad.error_code, duplicate.error_code) == (
        E.topic_already_exists,
        E.invalid_config,
        E.invalid_partitions,
    )
    [created] = create_topics(cluster, version, ("payments", -1, {"retention.ms": "1000"}))
    if version >= 5:
        assert (created.num_partitions, created.replication_factor) == (2, 1)
        configs = {c.name: c for c in created.configs}
        assert (
            configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
        )
        assert (
            configs["segment.bytes"].value == "1073741824"
            and configs["segment.bytes"].config_source == 5
        )
    if version >= 7:
        assert created.topic_id == cluster.controller.image.topics["payments"].topic_id
    assert sorted(cluster.controller.image.topics) == ["orders", "payments"]


def test_create_topics_validate_only(cluster):
    [result] = create_topics(cluster, 7, ("dry", 3, {}), validate_only=True)
    assert result.error_code == E.none and result.num_partitions == 3
    assert "dry" not in cluster.controller.image.topics


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_in_every_version(cluster, version):
    create_topics(cluster, 7, ("a", 1, {}), ("b", 1, {}))
    topic_id = cluster.controller.image.topics["b"].topic_id
    if version >= 6:
        body = {"topics": [{"name": "a"}, {"name": None, "topic_id": topic_id}, {"name": "ghost"}]}
    else:
        body = {"topic_names": ["a", "b", "ghost"]}
    body["timeout"] = 30000
    responses = cluster.call(handle_delete_topics, ApiKey.DELETE_TOPICS, version, body).responses
    assert [r.error_code for r in responses] == [E.none, E.none, E.unknown_topic_or_partition]
    assert responses[1].name == "b"
    assert cluster.controller.image.topics == {}
    if version >= 6:
        body = {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "timeout": 30000}
        [unknown] = cluster.call(
            handle_delete_topics, ApiKey.DELETE_TOPICS, version, body
        ).responses
        assert unknown.error_code == E.unknown_topic_id


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_in_every_version(cluster, version):
    create_topics(cluster, 7, ("t", 1, {}))
    body = {
        "topics": [
            {"name": "t", "count": 3, "assignments": None},
            {"name": "ghost", "count": 3, "assignments": None},
        ],
        "timeout": 30000,
        "validate_only": False,
    }
    results = cluster.call(
        handle_create_partitions, ApiKey.CREATE_PARTITIONS, version, body
    ).results
    assert [r.error_code for r in results] == [E.none, E.unknown_topic_or_partition]
    assert sorted(cluster.controller.image.topics["t"].partitions) == [0, 1, 2]
    body["topics"] = [{"name": "t", "count": 2, "assignments": None}]
    [shrink] = cluster.call(
        handle_create_partitions, ApiKey.CREATE_PARTITIONS, version, body
    ).results
    assert shrink.error_code == E.invalid_partitions and shrink.error_message


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_in_every_version(cluster, version):
    create_topics(cluster, 7, ("t", 1, {"cleanup.policy": "compact"}))
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.partitions"]},
            {"resource_type": 2, "resource_name": "ghost", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "9", "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": True,
    }
    topic, broker, ghost, other_broker = cluster.call(
        handle_describe_configs, ApiKey.DESCRIBE_CONFIGS, version, body
    ).results
    configs = {c.name: c for c in topic.configs}
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only, policy.is_sensitive) == (
        "compact",
        1,
        False,
        False,
    )
    assert [s.source for s in policy.synonyms] == [1, 5]
    [partitions] = broker.configs
    assert (partitions.name, partitions.value, partitions.config_source) == (
        "num.partitions",
        "2",
        4,
    )
    assert ghost.error_code == E.unknown_topic_or_partition
    assert other_broker.error_code == E.invalid_request
    if version >= 3:
        assert partitions.config_type == 3


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_in_every_version(cluster, version):
    create_topics(cluster, 7, ("t", 1, {"retention.ms": "1000"}))
    body = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "segment.ms", "value": "60000"}],
            },
            {"resource_type": 2, "resource_name": "t2", "configs": []},
        ],
        "validate_only": False,
    }
    responses = cluster.call(handle_alter_configs, ApiKey.ALTER_CONFIGS, version, body).responses
    assert [(r.resource_name, r.error_code) for r in responses] == [
        ("t", E.none),
        ("t2", E.unknown_topic_or_partition),
    ]
    assert dict(cluster.controller.image.topics["t"].configs) == {"segment.ms": "60000"}


@pytest.mark.parametrize("version", range(2))
def test_incremental_alter_configs_in_every_version(cluster, version):
    create_topics(cluster, 7, ("t", 1, {}))
    body = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "5000"}],
            },
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [{"name": "retention.ms", "config_operation": 9, "value": "1"}],
            },
            {
                "resource_type": 4,
                "resource_name": "",
                "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "77"}],
            },
        ],
        "validate_only": False,
    }
    responses = cluster.call(
        handle_incremental_alter_configs, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body
    ).responses
    assert [r.error_code for r in responses] == [E.none, E.invalid_request, E.none]
    assert [r.resource_type for r in responses] == [2, 2, 4]
    assert cluster.controller.image.topics["t"].configs["retention.ms"] == "5000"
    assert cluster.controller.image.broker_configs[""]["log.retention.ms"] == "77"


@pytest.mark.parametrize("version", range(3))
def test_describe_cluster_in_every_version(cluster, version):
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    response = cluster.call(handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, version, body)
    assert response.error_code == E.none
    assert response.cluster_id == cluster.controller.cluster_id
    assert response.controller_id == 1
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", 9092)]
    if version >= 1:  # (Kafka's AuthHelper.computeDescribeClusterResponse)
        body["endpoint_type"] = 2
        refused = cluster.call(handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, version, body)
        assert refused.error_code == E.mismatched_endpoint_type
        assert refused.error_message == (
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER"
        )
        assert (refused.controller_id, list(refused.brokers)) == (-1, [])
        body["endpoint_type"] = 3
        unknown = cluster.call(handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, version, body)
        assert unknown.error_code == E.unsupported_endpoint_type
        assert unknown.error_message == "Unsupported endpoint type 3"


def test_describe_cluster_v2_lists_fenced_brokers_when_asked(cluster):
    registration = BrokerRegistration(
        broker_id=2,
        incarnation_id=uuid.uuid4(),
        endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.2", port=9093)],
        rack="rack-b",
    )
    cluster.loop.run_until_complete(cluster.controller.register_broker(registration))  # fenced
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    live = cluster.call(handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, 2, body)
    assert [(b.broker_id, b.is_fenced) for b in live.brokers] == [(1, False)]
    body["include_fenced_brokers"] = True
    every = cluster.call(handle_describe_cluster, ApiKey.DESCRIBE_CLUSTER, 2, body)
    assert [(b.broker_id, b.rack, b.is_fenced) for b in every.brokers] == [
        (1, None, False),
        (2, "rack-b", True),
    ]


def _controller_registration(controller_id, port, incarnation):
    return {
        "controller_id": controller_id,
        "incarnation_id": uuid.UUID(int=incarnation),
        "zk_migration_ready": False,
        "listeners": [
            {"name": "CONTROLLER", "host": "127.0.0.1", "port": port, "security_protocol": 0}
        ],
        "features": [
            {"name": "metadata.version", "min_supported_version": 25, "max_supported_version": 25},
            {"name": "group.version", "min_supported_version": 0, "max_supported_version": 1},
            {"name": "transaction.version", "min_supported_version": 0, "max_supported_version": 2},
            {"name": "share.version", "min_supported_version": 0, "max_supported_version": 1},
        ],
    }


def test_controller_registration_over_the_wire_is_written_once(cluster):
    register = functools.partial(
        cluster.call,
        handle_controller_registration,
        ApiKey.CONTROLLER_REGISTRATION,
        0,
        scope=CONTROLLER,
    )
    answer = register(_controller_registration(1, 19091, incarnation=5))
    assert (answer.error_code, answer.error_message) == (E.none, None)
    registered = cluster.controller.image.controllers[1]
    assert registered.incarnation_id == uuid.UUID(int=5)
    assert [(e.name, e.host, e.port) for e in registered.endpoints] == [
        ("CONTROLLER", "127.0.0.1", 19091)
    ]
    offset = cluster.controller.image.offset
    assert register(_controller_registration(1, 19091, incarnation=5)).error_code == E.none
    assert cluster.controller.image.offset == offset  # the same registration: nothing written
    without_group_version = _controller_registration(2, 19092, incarnation=6)
    del without_group_version["features"][1]  # group.version 1 is finalized
    refused = register(without_group_version)
    assert refused.error_code == E.unsupported_version
    assert "group.version" in refused.error_message
    assert 2 not in cluster.controller.image.controllers


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_controller_listener_describes_the_registered_controllers(cluster, version):
    """KIP-919: what an admin client given --bootstrap-controller asks first."""
    for controller_id, port in ((2, 19092), (1, 19091)):
        answer = cluster.call(
            handle_controller_registration,
            ApiKey.CONTROLLER_REGISTRATION,
            0,
            _controller_registration(controller_id, port, incarnation=controller_id),
            scope=CONTROLLER,
        )
        assert answer.error_code == E.none
    describe = functools.partial(
        cluster.call,
        handle_describe_cluster,
        ApiKey.DESCRIBE_CLUSTER,
        version,
        scope=CONTROLLER,
        listener_name="CONTROLLER",
    )
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    response = describe(body)
    if version == 0:  # v0 cannot ask for controllers: Kafka answers INVALID_REQUEST
        assert response.error_code == E.invalid_request
        return
    assert response.error_code == E.none and response.endpoint_type == 2
    assert response.controller_id == cluster.controller.leader_id == 1
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (1, "127.0.0.1", 19091),
        (2, "127.0.0.1", 19092),
    ]
    # Only controllers with an endpoint on the listener asked: the leader is then not named.
    other_listener = cluster.call(
        handle_describe_cluster,
        ApiKey.DESCRIBE_CLUSTER,
        version,
        body,
        scope=CONTROLLER,
        listener_name="OTHER",
    )
    assert (other_listener.error_code, other_listener.controller_id) == (E.none, -1)
    assert list(other_listener.brokers) == []
    body["endpoint_type"] = 1
    refused = describe(body)
    assert refused.error_code == E.mismatched_endpoint_type
    assert refused.error_message == (
        "The request was sent to an endpoint of type CONTROLLER, "
        "but we wanted an endpoint of type BROKER"
    )
    # Moldau's: the live brokers, so a client pointed here can be told where they are.
    assert [(b.broker_id, b.host, b.port) for b in refused.brokers] == [(1, "127.0.0.1", 9092)]


@pytest.mark.parametrize("version", range(2))
def test_a_heartbeat_to_a_stopped_controller_is_answered_not_controller(cluster, version):
    """A node stopping has stopped its controller before its controller listeners close: a
    BrokerHeartbeat that arrives in between gets NOT_CONTROLLER (the broker asks the next
    controller), not an unknown server error and a traceback in the node's log."""
    cluster.node.controller = None
    body = {"broker_id": 2, "broker_epoch": 5, "current_metadata_offset": 10,
            "want_fence": False, "want_shut_down": False}  # fmt: skip
    answer = cluster.call(
        handle_broker_heartbeat, ApiKey.BROKER_HEARTBEAT, version, body, scope=CONTROLLER
    )
    assert answer.error_code == E.not_controller and answer.is_fenced
