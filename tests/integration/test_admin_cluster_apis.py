"""Cluster-level admin APIs against a real `moldau server`: ACLs without an authorizer, leader
elections, the metadata quorum, partition reassignments, client quotas, topic partitions
(KIP-966) and SCRAM credentials, through confluent-kafka, kafka-python and raw requests."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka import errors as kafka_errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaPythonResourceType

from moldau.protocol.errors import ErrorCode
from moldau.raft.voter_set import directory_uuid

from . import rdkafka
from .support import DEADLINE_S, unique_topic
from .wire import Connection


@pytest.fixture(scope="module")
def admin(server):
    return rdkafka.admin_client(server.bootstrap_servers)


@pytest.fixture(scope="module")
def python_admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def wire(server):
    with Connection(server.host, server.port) as connection:
        yield connection


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=DEADLINE_S)
    return raised.value.args[0]


# ACLs: no authorizer, so SECURITY_DISABLED as Kafka answers.

TOPIC_READ = AclBinding(
    ResourceType.TOPIC,
    "orders",
    ResourcePatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
ANY_ACL = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def test_confluent_acl_calls_fail_with_security_disabled(admin):
    [create_future] = admin.create_acls([TOPIC_READ], request_timeout=DEADLINE_S).values()
    assert error_of(create_future).code() == KafkaError.SECURITY_DISABLED

    # librdkafka drops DescribeAcls' top-level error code (against Kafka too): an empty list.
    assert admin.describe_acls(ANY_ACL, request_timeout=DEADLINE_S).result(DEADLINE_S) == []

    [delete_future] = admin.delete_acls([ANY_ACL], request_timeout=DEADLINE_S).values()
    assert error_of(delete_future).code() == KafkaError.SECURITY_DISABLED


def test_kafka_python_describe_acls_raises_security_disabled(python_admin):
    acl_filter = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY
        ),
    )
    with pytest.raises(kafka_errors.SecurityDisabledError):
        python_admin.describe_acls(acl_filter)
    acl = ACL(
        principal="User:bob",
        host="*",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(KafkaPythonResourceType.TOPIC, "payments"),
    )
    result = python_admin.create_acls([acl])
    assert result["succeeded"] == []
    assert result["failed"] == [kafka_errors.SecurityDisabledError]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acl_requests_answer_security_disabled_at_every_version(wire, version):
    acl_filter = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    described = wire.request(29, version, acl_filter)
    assert described.error_code == ErrorCode.security_disabled
    assert described.error_message == "No Authorizer is configured on the broker"
    assert described.resources == ()

    creation = {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    created = wire.request(30, version, {"creations": [creation, creation]})
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")
    ] * 2

    deleted = wire.request(31, version, {"filters": [acl_filter]})
    [result] = deleted.filter_results
    assert result.error_code == ErrorCode.security_disabled
    assert result.error_message == "No Authorizer is configured."
    assert result.matching_acls == ()


# Leader elections.


def create_topic(server, partitions: int = 2) -> str:
    topic = unique_topic("cluster-apis")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=partitions)
    return topic


def test_confluent_elect_leaders_reports_election_not_needed(admin, server):
    topic = create_topic(server)
    # (confluent-kafka 2.16's elect_leaders fails on keyword options: none passed)
    future = admin.elect_leaders(
        ElectionType.PREFERRED,
        [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 7)],
    )
    results = {(tp.topic, tp.partition): error for tp, error in future.result(DEADLINE_S).items()}
    assert results[(topic, 0)].code() == KafkaError.ELECTION_NOT_NEEDED
    assert results[(topic, 1)].code() == KafkaError.ELECTION_NOT_NEEDED
    assert results[(topic, 7)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_elect_leaders_ignores_election_not_needed(python_admin, server):
    topic = create_topic(server)
    # kafka-python names every partition itself; ELECTION_NOT_NEEDED is not raised.
    response = python_admin.elect_leaders(ElectionType.UNCLEAN.value, {topic: [0, 1]})
    assert response.error_code == 0
    [result] = response.replica_election_results
    assert result.topic == topic
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ErrorCode.election_not_needed),
        (1, ErrorCode.election_not_needed),
    ]


def test_electing_every_partition_lists_topics_without_partitions(admin, wire, server):
    topic = create_topic(server)
    response = wire.request(43, 2, {"election_type": 0, "topic_partitions": None})
    assert response.error_code == ErrorCode.none
    results = {r.topic: r.partition_result for r in response.replica_election_results}
    assert results[topic] == ()
    assert all(partitions == () for partitions in results.values())
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(DEADLINE_S) == {}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_wire_codes(wire, server, version):
    topic = create_topic(server, partitions=1)
    body = {
        "election_type": 0,
        "topic_partitions": [
            {"topic": topic, "partitions": [0, 3]},
            {"topic": "no-such-topic", "partitions": [0]},
        ],
        "timeout": 10_000,
    }
    response = wire.request(43, version, body)
    if version >= 1:
        assert response.error_code == ErrorCode.none
    assert [
        (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
        for r in response.replica_election_results
    ] == [
        (
            topic,
            [
                (0, ErrorCode.election_not_needed, None),
                (3, ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-3"),
            ],
        ),
        (
            "no-such-topic",
            [(0, ErrorCode.unknown_topic_or_partition, "No such topic as no-such-topic")],
        ),
    ]


def test_elect_leaders_with_unknown_election_type_is_invalid_request(wire, server):
    topic = create_topic(server, partitions=1)
    body = {"election_type": 5, "topic_partitions": [{"topic": topic, "partitions": [0]}]}
    response = wire.request(43, 2, body)
    assert response.error_code == ErrorCode.invalid_request
    [result] = response.replica_election_results
    [partition] = result.partition_result
    assert partition.error_code == ErrorCode.invalid_request
    assert partition.error_message == "Unknown election type 5"


# Partition reassignments.


def test_kafka_python_reassignments_on_a_single_node(python_admin, server):
    topic = create_topic(server)
    [broker] = python_admin.describe_cluster()["brokers"]
    broker_id = broker["broker_id"]
    results = python_admin.alter_partition_reassignments(
        {
            KafkaPythonTopicPartition(topic, 0): [broker_id],
            KafkaPythonTopicPartition(topic, 1): [broker_id + 100],
        }
    )
    assert results == {
        KafkaPythonTopicPartition(topic, 0): None,
        KafkaPythonTopicPartition(topic, 1): kafka_errors.InvalidReplicationAssignmentError,
    }
    cancelled = python_admin.alter_partition_reassignments(
        {KafkaPythonTopicPartition(topic, 0): None}
    )
    assert cancelled == {
        KafkaPythonTopicPartition(topic, 0): kafka_errors.NoReassignmentInProgressError
    }
    assert python_admin.list_partition_reassignments() == {}
    assert python_admin.list_partition_reassignments({topic: [0, 1]}) == {}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments_wire_codes(wire, server, version):
    topic = create_topic(server, partitions=1)
    replicas = list(
        wire.request(3, 12, {"topics": [{"name": topic}]}).topics[0].partitions[0].replica_nodes
    )
    body = {
        "timeout": 10_000,
        "allow_replication_factor_change": False,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "replicas": replicas},
                    {"partition_index": 0, "replicas": replicas * 2},
                    {"partition_index": 0, "replicas": []},
                    {"partition_index": 0, "replicas": None},
                    {"partition_index": 4, "replicas": replicas},
                ],
            },
            {"name": "no-such-topic", "partitions": [{"partition_index": 0, "replicas": [1]}]},
        ],
    }
    response = wire.request(45, version, body)
    assert response.error_code == ErrorCode.none
    codes = [
        [(p.partition_index, p.error_code) for p in topic_response.partitions]
        for topic_response in response.responses
    ]
    assert codes == [
        [
            (0, ErrorCode.none),
            (0, ErrorCode.invalid_replica_assignment),
            (0, ErrorCode.invalid_replica_assignment),
            (0, ErrorCode.no_reassignment_in_progress),
            (4, ErrorCode.unknown_topic_or_partition),
        ],
        [(0, ErrorCode.unknown_topic_or_partition)],
    ]
    listed = wire.request(46, 0, {"timeout": 10_000, "topics": None})
    assert listed.error_code == ErrorCode.none
    assert listed.topics == ()


# The metadata quorum.


def test_kafka_python_describe_metadata_quorum(python_admin, server):
    [broker] = python_admin.describe_cluster()["brokers"]
    node_id = broker["broker_id"]
    before_ms = int(time.time() * 1000)

    quorum = python_admin.describe_metadata_quorum()

    [topic] = quorum["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [partition] = topic["partitions"]
    assert partition["error"] is None
    assert partition["partition_index"] == 0
    assert partition["leader_id"] == node_id
    assert partition["leader_epoch"] >= 1
    assert partition["high_watermark"] > 0
    [voter] = partition["current_voters"]
    assert voter["replica_id"] == node_id
    assert voter["log_end_offset"] >= partition["high_watermark"]
    assert voter["last_fetch_timestamp"] >= before_ms
    assert voter["last_caught_up_timestamp"] >= before_ms
    assert partition["observers"] == []
    [node] = quorum["nodes"]
    assert node["node_id"] == node_id
    assert [(listener["host"], listener["port"]) for listener in node["listeners"]] == [
        (server.host, server.port)
    ]


def test_describe_quorum_high_watermark_follows_metadata_changes(wire, server):
    def describe(version):
        request = {
            "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]
        }
        response = wire.request(55, version, request)
        assert response.error_code == ErrorCode.none
        [topic] = response.topics
        [partition] = topic.partitions
        assert partition.error_code == ErrorCode.none
        return partition

    before = describe(0)
    create_topic(server, partitions=1)
    after = describe(1)
    assert after.leader_id == before.leader_id
    assert after.leader_epoch == before.leader_epoch
    assert after.high_watermark > before.high_watermark
    [voter] = after.current_voters
    assert voter.replica_id == after.leader_id
    assert voter.log_end_offset == after.high_watermark
    # The leader describes itself with its own directory id, as its followers are described
    # with the ids of their fetches (the all-zero Uuid, decoded as None, would read as unknown).
    meta = (server.data_dir / "meta.properties").read_text()
    [directory_id] = [
        x.split("=", 1)[1] for x in meta.splitlines() if x.startswith("directory.id=")
    ]
    assert describe(2).current_voters[0].replica_directory_id == directory_uuid(directory_id)


def test_describe_quorum_of_another_partition_is_unknown(wire):
    request = {
        "topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]},
            {"topic_name": "orders", "partitions": [{"partition_index": 0}]},
        ]
    }
    response = wire.request(55, 2, request)
    assert response.error_code == ErrorCode.none
    assert [
        (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in response.topics
    ] == [
        ("__cluster_metadata", [(1, ErrorCode.unknown_topic_or_partition)]),
        ("orders", [(0, ErrorCode.unknown_topic_or_partition)]),
    ]


# Client quotas in the metadata (their enforcement: test_client_quotas.py).


def alter_quotas(wire, entries, *, version=1, validate_only=False):
    response = wire.request(49, version, {"entries": entries, "validate_only": validate_only})
    return [
        (
            [(e.entity_type, e.entity_name) for e in result.entity],
            result.error_code,
            result.error_message,
        )
        for result in response.entries
    ]


def describe_quotas(wire, components, *, strict=False, version=1):
    response = wire.request(48, version, {"components": components, "strict": strict})
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def quota_entry(entity, **ops):
    return {
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [
            {"key": key, "value": 0.0 if value is None else value, "remove": value is None}
            for key, value in ops.items()
        ],
    }


def test_client_quotas_are_stored_and_described(wire):
    user = unique_topic("user")
    both = [("user", user), ("client-id", "app")]
    assert alter_quotas(
        wire,
        [
            quota_entry([("user", user)], producer_byte_rate=1024.0, request_percentage=12.5),
            quota_entry(both, consumer_byte_rate=2048.0),
            quota_entry([("client-id", None)], controller_mutation_rate=3.0),
        ],
    ) == [
        ([("user", user)], ErrorCode.none, None),
        (both, ErrorCode.none, None),
        ([("client-id", None)], ErrorCode.none, None),
    ]

    exact = {"entity_type": "user", "match_type": 0, "match": user}
    assert describe_quotas(wire, [exact], version=0) == {
        (("user", user),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("client-id", "app"), ("user", user)): {"consumer_byte_rate": 2048.0},
    }
    assert describe_quotas(wire, [exact], strict=True) == {
        (("user", user),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5}
    }
    default_client = {"entity_type": "client-id", "match_type": 1, "match": None}
    assert describe_quotas(wire, [default_client], strict=True) == {
        (("client-id", None),): {"controller_mutation_rate": 3.0}
    }
    any_client = {"entity_type": "client-id", "match_type": 2, "match": None}
    assert describe_quotas(wire, [exact, any_client]) == {
        (("client-id", "app"), ("user", user)): {"consumer_byte_rate": 2048.0}
    }

    assert alter_quotas(
        wire, [quota_entry([("user", user)], producer_byte_rate=None)], version=0
    ) == [([("user", user)], ErrorCode.none, None)]
    assert describe_quotas(wire, [exact], strict=True) == {
        (("user", user),): {"request_percentage": 12.5}
    }


def test_invalid_client_quotas_are_rejected_and_change_nothing(wire):
    user = unique_topic("user")
    results = alter_quotas(
        wire,
        [
            quota_entry([("user", user)], not_a_quota=1.0),
            quota_entry([("client-id", user)], producer_byte_rate=1.5),
            quota_entry([("ip", "1.2.3.4"), ("user", user)], connection_creation_rate=1.0),
            quota_entry([("group", user)], producer_byte_rate=1.0),
            quota_entry([("ip", "not-an-ip")], connection_creation_rate=1.0),
            quota_entry([("user", "")], producer_byte_rate=1.0),
        ],
    )
    assert [(code, message) for _, code, message in results] == [
        (ErrorCode.invalid_request, "Invalid configuration key not_a_quota"),
        (ErrorCode.invalid_request, "Configuration producer_byte_rate must be a Long value"),
        (
            ErrorCode.invalid_request,
            "Invalid quota entity combination, IP entity should not be combined with User or "
            "ClientId",
        ),
        (ErrorCode.invalid_request, "Unhandled client quota entity type: group"),
        (ErrorCode.invalid_request, "not-an-ip is not a valid IP or resolvable host."),
        (ErrorCode.invalid_request, "Empty user not supported"),
    ]
    validated = alter_quotas(
        wire, [quota_entry([("user", user)], producer_byte_rate=10.0)], validate_only=True
    )
    assert validated == [([("user", user)], ErrorCode.none, None)]
    exact = {"entity_type": "user", "match_type": 0, "match": user}
    assert describe_quotas(wire, [exact]) == {}
    ip_default = {"entity_type": "ip", "match_type": 1, "match": None}
    assert alter_quotas(wire, [quota_entry([("ip", None)], connection_creation_rate=7.0)]) == [
        ([("ip", None)], ErrorCode.none, None)
    ]
    assert describe_quotas(wire, [ip_default]) == {
        (("ip", None),): {"connection_creation_rate": 7.0}
    }


@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([{"entity_type": "group", "match_type": 2, "match": None}], ErrorCode.unsupported_version),
        ([{"entity_type": "user", "match_type": 0, "match": None}], ErrorCode.invalid_request),
        ([{"entity_type": "user", "match_type": 7, "match": None}], ErrorCode.invalid_request),
        (
            [
                {"entity_type": "ip", "match_type": 2, "match": None},
                {"entity_type": "user", "match_type": 2, "match": None},
            ],
            ErrorCode.invalid_request,
        ),
    ],
)
def test_malformed_quota_filters_are_rejected(wire, components, code):
    response = wire.request(48, 1, {"components": components, "strict": False})
    assert response.error_code == code
    assert response.entries is None


# DescribeTopicPartitions (KIP-966).


def test_describe_topic_partitions_pages_with_a_cursor(wire, server):
    prefix = unique_topic("dtp")
    first, second, missing = f"{prefix}-a", f"{prefix}-b", f"{prefix}-missing"
    rdkafka.create_topic(server.bootstrap_servers, first, partitions=3)
    rdkafka.create_topic(server.bootstrap_servers, second, partitions=2)
    requested = [{"name": n} for n in (second, missing, first, "bad/name")]

    def page(limit, cursor=None):
        response = wire.request(
            75, 0, {"topics": requested, "response_partition_limit": limit, "cursor": cursor}
        )
        shown = [
            (t.name, t.error_code, [p.partition_index for p in t.partitions])
            for t in response.topics
        ]
        next_cursor = response.next_cursor
        return shown, next_cursor and (next_cursor.topic_name, next_cursor.partition_index)

    assert page(2) == (
        [
            ("bad/name", ErrorCode.invalid_topic_exception, []),
            (first, ErrorCode.none, [0, 1]),
        ],
        (first, 2),
    )
    assert page(2, {"topic_name": first, "partition_index": 2}) == (
        [(first, ErrorCode.none, [2]), (second, ErrorCode.none, [0])],
        (second, 1),
    )
    assert page(10, {"topic_name": second, "partition_index": 1}) == (
        [(second, ErrorCode.none, [1]), (missing, ErrorCode.unknown_topic_or_partition, [])],
        None,
    )
    assert page(10, {"topic_name": "not-requested", "partition_index": 0})[0] == [
        (t["name"], ErrorCode.invalid_request, []) for t in requested
    ]
    assert page(10, {"topic_name": first, "partition_index": -1})[0] == [
        (t["name"], ErrorCode.invalid_request, []) for t in requested
    ]


def test_describe_topic_partitions_fields(wire, server):
    topic = create_topic(server, partitions=1)
    metadata = wire.request(3, 12, {"topics": [{"name": topic}]})
    [expected] = metadata.topics
    response = wire.request(
        75, 0, {"topics": [{"name": topic}], "response_partition_limit": 2000, "cursor": None}
    )
    [described] = response.topics
    assert (described.name, described.topic_id, described.is_internal) == (
        topic,
        expected.topic_id,
        False,
    )
    [partition] = described.partitions
    [expected_partition] = expected.partitions
    assert partition.error_code == ErrorCode.none
    assert partition.leader_id == expected_partition.leader_id
    assert partition.leader_epoch == expected_partition.leader_epoch
    assert partition.replica_nodes == expected_partition.replica_nodes
    assert partition.isr_nodes == (partition.leader_id,)
    assert partition.eligible_leader_replicas == ()
    assert partition.last_known_elr == ()
    assert partition.offline_replicas == ()
    assert response.next_cursor is None

    everything = wire.request(75, 0, {"topics": [], "response_partition_limit": 2000})
    assert topic in {t.name for t in everything.topics}
    assert all(t.error_code == ErrorCode.none for t in everything.topics)


# SCRAM credentials (none stored).


def test_confluent_describe_user_scram_credentials(admin):
    assert admin.describe_user_scram_credentials().result(DEADLINE_S) == {}
    [future] = admin.describe_user_scram_credentials(["alice"]).values()
    assert error_of(future).code() == KafkaError.RESOURCE_NOT_FOUND


def test_kafka_python_describe_user_scram_credentials(python_admin):
    assert python_admin.describe_user_scram_credentials() == {}
    assert python_admin.describe_user_scram_credentials(["bob"]) == {
        "bob": {
            "error": "Attempt to describe a user credential that does not exist: bob",
            "credential_infos": [],
        }
    }


def test_describe_user_scram_credentials_wire_codes(wire):
    users = [{"name": "carol"}, {"name": "dave"}, {"name": "carol"}]
    response = wire.request(50, 0, {"users": users})
    assert response.error_code == ErrorCode.none
    assert [(r.user, r.error_code, r.credential_infos) for r in response.results] == [
        ("carol", ErrorCode.duplicate_resource, ()),
        ("dave", ErrorCode.resource_not_found, ()),
    ]
    assert wire.request(50, 0, {"users": None}).results == ()


# Finalized features (KIP-584): ApiVersions' feature fields, UpdateFeatures.


def test_kafka_python_describes_the_features_moldau_supports_and_finalized(python_admin):
    features = python_admin.describe_features()
    assert features["metadata.version"]["supported"] == (25, 25)
    assert features["metadata.version"]["finalized"] == (25, 25)
    assert features["group.version"]["finalized"] == (1, 1)
    assert features["share.version"]["finalized"] == (1, 1)
    assert features["transaction.version"]["finalized"] == (2, 2)
    assert features["transaction.version"]["supported"] == (0, 2)
    assert features["kraft.version"]["supported"] == (0, 1)
    assert "finalized" not in features["kraft.version"]  # level 0: not finalized
    assert features["metadata.version"]["finalized_epoch"] >= 0


def test_kafka_python_update_features_refuses_what_moldau_does_not_support(python_admin):
    assert python_admin.update_features({"group.version": 1}, validate_only=True) == {
        "group.version": "OK"
    }
    with pytest.raises(kafka_errors.InvalidUpdateVersionError, match="only supports versions 0-2"):
        python_admin.update_features({"transaction.version": 3})
    with pytest.raises(kafka_errors.InvalidUpdateVersionError, match="downgrad"):
        python_admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
    assert python_admin.describe_features()["group.version"]["finalized"] == (1, 1)
