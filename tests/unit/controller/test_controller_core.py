import itertools
import uuid

import pytest

from moldau.config.values import BrokerConfig
from moldau.controller.core import PRODUCER_ID_BLOCK_SIZE, ControllerCore
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    BrokerRegistration,
    ConfigResource,
    IncrementalAlterConfigsResource,
    NewTopic,
    PartitionsIncrease,
)
from moldau.metadata.records import BrokerEndpoint, ConfigResourceType, TopicRecord
from moldau.protocol.errors import ErrorCode, KafkaError

E = ErrorCode


def counting_uuids():
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


def make_core(brokers=(1,), racks=None, **config):
    """A core with `brokers` registered and unfenced (`racks`: broker id -> rack)."""
    core = ControllerCore(config=BrokerConfig(config), uuid_factory=counting_uuids())
    offset = 0
    for broker_id in brokers:
        records, _ = core.register_broker(
            BrokerRegistration(
                broker_id=broker_id,
                incarnation_id=uuid.UUID(int=1000 + broker_id),
                endpoints=[
                    BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9090 + broker_id)
                ],
                rack=(racks or {}).get(broker_id),
            )
        )
        offset += len(records)
        core.replay(records, offset=offset)
    return core


def commit(core, operation_result):
    records, results = operation_result
    core.replay(records, offset=core.image.offset + max(1, len(records)))
    return results


def codes(results):
    return [r.error_code for r in results]


def topic(name, **kwargs):
    return NewTopic(name=name, **kwargs)


def test_create_topics_uses_broker_defaults_and_spreads_leaders():
    core = make_core(
        brokers=(1, 2, 3), **{"num.partitions": "4", "default.replication.factor": "2"}
    )
    [result] = commit(core, core.create_topics([topic("orders")]))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (E.none, 4, 2)
    orders = core.image.topics["orders"]
    assert orders.topic_id == result.topic_id
    assert len(orders.partitions) == 4
    assert {p.leader for p in orders.partitions.values()} == {1, 2, 3}
    for partition in orders.partitions.values():
        assert len(set(partition.replicas)) == 2
        assert partition.isr == partition.replicas and partition.leader == partition.replicas[0]


def test_create_topics_records_configs_and_explicit_sizes():
    core = make_core()
    records, [result] = core.create_topics(
        [
            topic(
                "t",
                num_partitions=3,
                replication_factor=1,
                configs={"cleanup.policy": "compact", "retention.ms": None},
            )
        ]
    )
    assert isinstance(records[0], TopicRecord)
    assert result.configs == {"cleanup.policy": "compact"}
    core.replay(records, offset=10)
    assert dict(core.image.topics["t"].configs) == {"cleanup.policy": "compact"}
    assert len(core.image.topics["t"].partitions) == 3


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "has space", "slash/y", "ünïcode", "colon:x"],
)
def test_illegal_topic_names_are_invalid_topic_exception(name):
    core = make_core()
    records, [result] = core.create_topics([topic(name)])
    assert records == [] and result.error_code == E.invalid_topic_exception
    assert result.error_message


def test_legal_names_include_every_allowed_character_up_to_249():
    core = make_core()
    results = commit(core, core.create_topics([topic("a" * 249), topic("A-z_0.9")]))
    assert codes(results) == [E.none, E.none]


def test_dot_and_underscore_collisions_are_refused_against_existing_and_same_request():
    core = make_core()
    commit(core, core.create_topics([topic("metrics.cpu")]))
    results = commit(core, core.create_topics([topic("metrics_cpu"), topic("x_y"), topic("x.y")]))
    assert codes(results) == [E.invalid_topic_exception, E.none, E.invalid_topic_exception]
    assert "collides" in results[0].error_message


def test_existing_topics_duplicates_and_bad_sizes():
    core = make_core()
    commit(core, core.create_topics([topic("t")]))
    results = commit(
        core,
        core.create_topics(
            [
                topic("t"),
                topic("dup"),
                topic("dup"),
                topic("zero", num_partitions=0),
                topic("neg", num_partitions=-2),
                topic("rf0", replication_factor=0),
                topic("rf2", replication_factor=2),
            ]
        ),
    )
    assert codes(results) == [
        E.topic_already_exists,
        E.invalid_request,
        E.invalid_request,
        E.invalid_partitions,
        E.invalid_partitions,
        E.invalid_replication_factor,
        E.invalid_replication_factor,
    ]
    assert "only 1 broker(s)" in results[-1].error_message
    assert set(core.image.topics) == {"t"}


def test_invalid_topic_configs_are_invalid_config():
    core = make_core()
    results = commit(
        core,
        core.create_topics(
            [
                topic("a", configs={"no.such.config": "1"}),
                topic("b", configs={"retention.ms": "soon"}),
                topic("c", configs={"cleanup.policy": "shred"}),
            ]
        ),
    )
    assert codes(results) == [E.invalid_config] * 3
    assert core.image.topics == {}


def test_validate_only_returns_results_without_records():
    core = make_core()
    records, [result] = core.create_topics([topic("t", num_partitions=5)], validate_only=True)
    assert records == [] and result.error_code == E.none and result.num_partitions == 5


def test_manual_assignments():
    core = make_core(brokers=(1, 2, 3))
    results = commit(
        core,
        core.create_topics(
            [
                topic("ok", assignments={0: [3, 1], 1: [2, 3]}),
                topic("gap", assignments={0: [1], 2: [2]}),
                topic("unknown-broker", assignments={0: [9]}),
                topic("duplicate-replica", assignments={0: [1, 1]}),
                topic("uneven", assignments={0: [1, 2], 1: [3]}),
                topic("with-count", num_partitions=2, assignments={0: [1]}),
            ]
        ),
    )
    assert codes(results) == [
        E.none,
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_request,
    ]
    partitions = core.image.topics["ok"].partitions
    assert (partitions[0].replicas, partitions[0].leader) == ((3, 1), 3)
    assert (partitions[1].replicas, partitions[1].leader) == ((2, 3), 2)


def test_delete_topics_by_name_and_id():
    core = make_core(**{"delete.topic.enable": "true"})
    created = commit(core, core.create_topics([topic("a"), topic("b")]))
    results = commit(
        core, core.delete_topics(["a", created[1].topic_id, "ghost", uuid.UUID(int=999)])
    )
    assert codes(results) == [E.none, E.none, E.unknown_topic_or_partition, E.unknown_topic_id]
    assert results[1].name == "b" and results[0].topic_id == created[0].topic_id
    assert core.image.topics == {}


def test_delete_topics_refused_when_disabled_and_for_duplicates():
    core = make_core(**{"delete.topic.enable": "false"})
    commit(core, core.create_topics([topic("a")]))
    assert codes(commit(core, core.delete_topics(["a"]))) == [E.topic_deletion_disabled]
    core = make_core()
    commit(core, core.create_topics([topic("a")]))
    assert codes(commit(core, core.delete_topics(["a", "a"]))) == [E.invalid_request] * 2
    assert "a" in core.image.topics


def test_create_partitions_only_grows():
    core = make_core(brokers=(1, 2))
    commit(core, core.create_topics([topic("t", num_partitions=2, replication_factor=2)]))
    results = commit(
        core,
        core.create_partitions(
            [
                PartitionsIncrease(name="t", count=4),
                PartitionsIncrease(name="ghost", count=4),
            ]
        ),
    )
    assert codes(results) == [E.none, E.unknown_topic_or_partition]
    partitions = core.image.topics["t"].partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    assert all(len(p.replicas) == 2 for p in partitions.values())
    results = commit(
        core,
        core.create_partitions([PartitionsIncrease(name="t", count=4)]),
    )
    assert codes(results) == [E.invalid_partitions]
    assert codes(commit(core, core.create_partitions([PartitionsIncrease(name="t", count=3)]))) == [
        E.invalid_partitions
    ]


def test_create_partitions_with_assignments_and_validate_only():
    core = make_core(brokers=(1, 2))
    commit(core, core.create_topics([topic("t", num_partitions=1, replication_factor=1)]))
    bad = commit(
        core, core.create_partitions([PartitionsIncrease(name="t", count=3, assignments=[[2]])])
    )
    assert codes(bad) == [E.invalid_replica_assignment]
    records, results = core.create_partitions(
        [PartitionsIncrease(name="t", count=3, assignments=[[2], [1]])], validate_only=True
    )
    assert records == [] and codes(results) == [E.none]
    commit(
        core,
        core.create_partitions([PartitionsIncrease(name="t", count=3, assignments=[[2], [1]])]),
    )
    assert [p.leader for p in core.image.topics["t"].partitions.values()][1:] == [2, 1]


def topic_resource(name):
    return ConfigResource(resource_type=ConfigResourceType.TOPIC, resource_name=name)


def broker_resource(name):
    return ConfigResource(resource_type=ConfigResourceType.BROKER, resource_name=name)


def test_alter_configs_replaces_the_whole_set():
    core = make_core()
    commit(
        core,
        core.create_topics([topic("t", configs={"retention.ms": "1", "segment.bytes": "1000"})]),
    )
    results = commit(
        core,
        core.alter_configs(
            [
                AlterConfigsResource(
                    resource=topic_resource("t"), configs={"cleanup.policy": "compact"}
                )
            ]
        ),
    )
    assert codes(results) == [E.none]
    assert dict(core.image.topics["t"].configs) == {"cleanup.policy": "compact"}


def test_alter_configs_errors_per_resource():
    core = make_core()
    commit(core, core.create_topics([topic("t")]))
    results = commit(
        core,
        core.alter_configs(
            [
                AlterConfigsResource(resource=topic_resource("ghost"), configs={}),
                AlterConfigsResource(resource=topic_resource("t"), configs={"retention.ms": "x"}),
                AlterConfigsResource(resource=broker_resource("one"), configs={}),
                AlterConfigsResource(resource=broker_resource(""), configs={"node.id": "5"}),
                AlterConfigsResource(
                    resource=broker_resource("1"), configs={"log.retention.ms": "100"}
                ),
            ]
        ),
    )
    assert codes(results) == [
        E.unknown_topic_or_partition,
        E.invalid_config,
        E.invalid_request,
        E.invalid_config,
        E.none,
    ]
    assert dict(core.image.broker_configs["1"]) == {"log.retention.ms": "100"}


def test_incremental_alter_configs_set_delete_append_subtract():
    core = make_core()
    commit(core, core.create_topics([topic("t", configs={"retention.ms": "1"})]))

    def change(*configs):
        return commit(
            core,
            core.incremental_alter_configs(
                [
                    IncrementalAlterConfigsResource(
                        resource=topic_resource("t"), configs=list(configs)
                    )
                ]
            ),
        )

    assert codes(
        change(AlterableConfig(name="segment.bytes", op=AlterConfigOp.SET, value="2000"))
    ) == [E.none]
    assert codes(
        change(AlterableConfig(name="retention.ms", op=AlterConfigOp.DELETE, value=None))
    ) == [E.none]
    assert dict(core.image.topics["t"].configs) == {"segment.bytes": "2000"}
    assert codes(
        change(AlterableConfig(name="cleanup.policy", op=AlterConfigOp.APPEND, value="compact"))
    ) == [E.none]
    assert core.image.topics["t"].configs["cleanup.policy"] == "delete,compact"
    assert codes(
        change(AlterableConfig(name="cleanup.policy", op=AlterConfigOp.SUBTRACT, value="delete"))
    ) == [E.none]
    assert core.image.topics["t"].configs["cleanup.policy"] == "compact"
    assert codes(
        change(AlterableConfig(name="segment.bytes", op=AlterConfigOp.APPEND, value="1"))
    ) == [E.invalid_config]
    assert codes(
        change(AlterableConfig(name="segment.bytes", op=AlterConfigOp.SET, value="-5"))
    ) == [E.invalid_config]
    assert codes(change(AlterableConfig(name="bogus", op=AlterConfigOp.SET, value="1"))) == [
        E.invalid_config
    ]
    assert codes(
        change(
            AlterableConfig(name="segment.bytes", op=AlterConfigOp.SET, value="3000"),
            AlterableConfig(name="segment.bytes", op=AlterConfigOp.DELETE, value=None),
        )
    ) == [E.invalid_request]
    assert dict(core.image.topics["t"].configs) == {
        "segment.bytes": "2000",
        "cleanup.policy": "compact",
    }


def test_incremental_alter_broker_default_and_node_configs():
    core = make_core()
    results = commit(
        core,
        core.incremental_alter_configs(
            [
                IncrementalAlterConfigsResource(
                    resource=broker_resource(""),
                    configs=[
                        AlterableConfig(
                            name="log.retention.ms", op=AlterConfigOp.SET, value="60000"
                        )
                    ],
                ),
                IncrementalAlterConfigsResource(
                    resource=broker_resource("1"),
                    configs=[
                        AlterableConfig(
                            name="listeners", op=AlterConfigOp.SET, value="PLAINTEXT://x:1"
                        )
                    ],
                ),
            ]
        ),
    )
    assert codes(results) == [E.none, E.invalid_config]
    assert core.image.broker_config_overrides(1) == {"log.retention.ms": "60000"}


def test_duplicate_config_resources_are_invalid_request():
    core = make_core()
    commit(core, core.create_topics([topic("t")]))
    resource = AlterConfigsResource(resource=topic_resource("t"), configs={})
    assert codes(commit(core, core.alter_configs([resource, resource]))) == [E.invalid_request] * 2


def test_broker_registration_gives_increasing_epochs_and_unfences():
    core = make_core(brokers=())
    registration = BrokerRegistration(broker_id=1, incarnation_id=uuid.uuid4(), endpoints=[])
    first = commit(core, core.register_broker(registration))
    assert not core.image.brokers[1].fenced
    second = commit(core, core.register_broker(registration))
    assert second.broker_epoch > first.broker_epoch
    assert core.image.brokers[1].broker_epoch == second.broker_epoch


def test_producer_ids_come_in_disjoint_blocks_of_1000():
    core = make_core()
    epoch = core.image.brokers[1].broker_epoch
    first = commit(core, core.allocate_producer_ids(1, epoch))
    second = commit(core, core.allocate_producer_ids(1))
    assert (first.first_producer_id, first.size) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert second.first_producer_id == first.last_producer_id + 1
    with pytest.raises(KafkaError) as stale:
        core.allocate_producer_ids(1, epoch + 100)
    assert stale.value.code == E.stale_broker_epoch
    with pytest.raises(KafkaError) as unknown:
        core.allocate_producer_ids(7)
    assert unknown.value.code == E.broker_id_not_registered


def test_operations_never_change_state_until_replayed():
    core = make_core()
    before = core.image
    core.create_topics([topic("t")])
    core.allocate_producer_ids(1)
    assert core.image is before
