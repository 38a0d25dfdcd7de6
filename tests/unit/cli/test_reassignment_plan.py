"""The files of `moldau cluster reassign` (Kafka's JSON formats), placement and throttles."""

from __future__ import annotations

import json

import pytest

from moldau.cli.reassignment_plan import (
    COMPLETE,
    FAILED,
    IN_PROGRESS,
    PartitionShape,
    PlanError,
    assign_replicas,
    brokers_involved,
    move_progress,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    progress,
    propose,
    rack_alternated,
    reassignment_json,
    throttled_replicas,
    unknown_log_dirs,
)
from moldau.client.log_dirs import ReplicaLogDirInfo
from moldau.client.log_dirs import TopicPartitionReplica as Replica
from moldau.types import TopicPartition as TP


def test_kafkas_reassignment_json_reads_back_what_is_written() -> None:
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,1],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":0,"replicas":[2,3]}]}'
    )
    plan = parse_reassignment(text)
    targets = plan.replicas
    assert targets == {TP("t", 1): (3, 1), TP("t", 0): (2, 3)}
    assert plan.log_dirs == {}
    assert reassignment_json(targets) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[3,1],'
        '"log_dirs":["any","any"]}]}'
    )
    assert parse_reassignment(reassignment_json(targets)).replicas == dict(sorted(targets.items()))


def test_log_dirs_other_than_any_name_the_dir_of_that_replica() -> None:
    plan = parse_reassignment(
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1,2],'
        '"log_dirs":["/data/b","any","/data/a/"]}]}'
    )
    assert plan.replicas == {TP("t", 0): (3, 1, 2)}
    assert plan.log_dirs == {Replica("t", 0, 3): "/data/b", Replica("t", 0, 2): "/data/a/"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"version":2,"partitions":[]}', "only version 1"),
        ('{"version":1}', 'non-empty "partitions"'),
        ('{"partitions":[{"partition":0,"replicas":[1]}]}', 'no "topic"'),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "non-negative"),
        ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', "non-negative"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "non-empty list"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}', "broker ids"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}', "duplicate replicas"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}',
            "t-0 is listed twice",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "1 entries for 2 replicas",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["data/a"]}]}',
            "t-0 on broker 1: log dir 'data/a' must be an absolute path",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":[""]}]}',
            "list of paths",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":"/data/a"}]}',
            "list of paths",
        ),
    ],
)
def test_a_bad_reassignment_file_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PlanError, match=message) as raised:
        parse_reassignment(text)
    assert "\n" not in str(raised.value)


def test_topics_to_move_and_broker_list() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == [
        "a",
        "b",
    ]
    with pytest.raises(PlanError, match="listed twice"):
        parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    with pytest.raises(PlanError, match='"topic" name'):
        parse_topics_to_move('{"topics":[{"name":"a"}]}')
    assert parse_broker_list("3, 1,2") == [3, 1, 2]
    with pytest.raises(PlanError, match="listed twice"):
        parse_broker_list("1,2,1")
    with pytest.raises(PlanError, match="broker ids separated by commas"):
        parse_broker_list("1,b")


def test_round_robin_placement_is_kafkas() -> None:
    """AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, 3 replicas, start 0."""
    placed = assign_replicas(PartitionShape("t", 10, 3), [4, 2, 0, 3, 1], {}, 0)
    assert placed == [
        (0, 1, 2),
        (1, 2, 3),
        (2, 3, 4),
        (3, 4, 0),
        (4, 0, 1),
        (0, 2, 3),
        (1, 3, 4),
        (2, 4, 0),
        (3, 0, 1),
        (4, 1, 2),
    ]


def test_rack_aware_placement_is_kafkas() -> None:
    """AdminUtilsTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers."""
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(list(racks), racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated([0, 1, 2, 3, 4], racks) == [0, 3, 1, 4, 2]
    placed = assign_replicas(PartitionShape("t", 7, 3), list(racks), racks, 0)
    assert placed == [(0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3), (0, 4, 2)]


def test_a_proposal_uses_only_the_given_brokers_and_is_the_same_each_time() -> None:
    shapes = [PartitionShape("orders", 6, 2), PartitionShape("audit", 1, 1)]
    proposed = propose(shapes, [4, 2, 3])
    assert proposed == propose(shapes, [4, 2, 3])
    assert sorted(proposed) == [TP("audit", 0)] + [TP("orders", p) for p in range(6)]
    for replicas in proposed.values():
        assert set(replicas) <= {2, 3, 4} and len(set(replicas)) == len(replicas)
    assert [len(proposed[TP("orders", p)]) for p in range(6)] == [2] * 6
    leaders = [proposed[TP("orders", p)][0] for p in range(6)]
    assert sorted(leaders) == [2, 2, 3, 3, 4, 4]

    racks = {2: "a", 3: "a", 4: "b"}
    for replicas in propose([PartitionShape("orders", 6, 2)], [2, 3, 4], racks).values():
        assert {racks[r] for r in replicas} == {"a", "b"}
    with pytest.raises(PlanError, match="only 2 brokers were given"):
        propose([PartitionShape("orders", 1, 3)], [1, 2])


def test_throttles_cover_the_moving_partitions_only() -> None:
    current = {TP("t", 0): (1, 2), TP("t", 1): (2, 3), TP("u", 0): (1,)}
    target = {TP("t", 0): (3, 2), TP("t", 1): (2, 3), TP("u", 0): (2,)}
    assert throttled_replicas(current, target) == {
        "t": {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:3",
        },
        "u": {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "0:2",
        },
    }
    assert brokers_involved(current, target) == [1, 2, 3]
    assert throttled_replicas(current, current) == {}


def test_verify_verdicts() -> None:
    assert progress((2, 3), (2, 3, 1), reassigning=True) == IN_PROGRESS
    assert progress((2, 3), (2, 3), reassigning=False) == COMPLETE
    assert progress((2, 3), (3, 2), reassigning=False) == FAILED
    assert progress((2, 3), (1, 2), reassigning=False) == FAILED


def test_written_json_is_kafkas_shape() -> None:
    data = json.loads(reassignment_json({TP("t", 0): (1, 2)}))
    assert data == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
        ],
    }


def test_verify_verdicts_of_log_dir_moves() -> None:
    replica = Replica("t", 0, 2)

    def verdict(info: ReplicaLogDirInfo, *, reassigning: bool = False) -> tuple[str, str]:
        return move_progress(replica, "/data/b", info, reassigning=reassigning)

    assert verdict(ReplicaLogDirInfo(current_log_dir="/data/b/")) == (
        COMPLETE,
        "Reassignment of replica t-0 on broker 2 completed successfully.",
    )
    moving = ReplicaLogDirInfo(current_log_dir="/data/a", future_log_dir="/data/b")
    assert verdict(moving) == (
        IN_PROGRESS,
        "Reassignment of replica t-0 on broker 2 is still in progress.",
    )
    elsewhere = ReplicaLogDirInfo(current_log_dir="/data/a", future_log_dir="/data/c")
    assert verdict(elsewhere) == (
        IN_PROGRESS,
        "Partition t-0 on broker 2 is being moved to log dir /data/c instead of /data/b.",
    )
    assert verdict(ReplicaLogDirInfo(current_log_dir="/data/a")) == (
        FAILED,
        "Partition t-0 on broker 2 is not being moved from log dir /data/a to /data/b.",
    )
    # not created yet on a broker the partition is being reassigned to
    assert verdict(ReplicaLogDirInfo(), reassigning=True)[0] == IN_PROGRESS
    status, line = verdict(ReplicaLogDirInfo())
    assert status == FAILED and "not found in any live log dir on broker 2" in line


def test_unknown_log_dirs_compare_normalized_paths_per_broker() -> None:
    wanted = {Replica("t", 0, 1): "/a/", Replica("t", 0, 2): "/a", Replica("t", 1, 3): "/c"}
    known = {1: ["/a", "/b"], 2: ["/b"]}
    assert unknown_log_dirs(wanted, known) == [
        (Replica("t", 0, 2), "/a"),
        (Replica("t", 1, 3), "/c"),
    ]
