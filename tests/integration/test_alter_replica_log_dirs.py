"""AlterReplicaLogDirs on a real server with two log dirs: a replica moves while a real client
keeps producing, DescribeLogDirs follows it, and every record is read back once, in order; a
move survives a SIGKILL whole; replica.alter.log.dirs.io.max.bytes.per.second holds a move back."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from moldau.protocol.errors import ErrorCode

from . import rdkafka
from .support import Record, assert_same_records, now_ms, unique_topic, wait_until
from .wire import Connection, describe_log_dirs


def alter_replica_log_dirs(connection: Connection, dirs: list[tuple[str, str, list[int]]]) -> Any:
    """AlterReplicaLogDirs v2: (path, topic, partitions) per entry; {(topic, partition): code}."""
    response = connection.request(
        34,
        2,
        {
            "dirs": [
                {"path": path, "topics": [{"name": topic, "partitions": partitions}]}
                for path, topic, partitions in dirs
            ]
        },
    )
    return [
        (result.topic_name, partition.partition_index, partition.error_code)
        for result in response.results
        for partition in result.partitions
    ]


def placement(connection: Connection, topic: str) -> set[tuple[str, bool]]:
    """(log dir, is future) of every replica of `topic`'s partition 0 on the server."""
    return {
        (result.log_dir, partition.is_future_key)
        for result in describe_log_dirs(connection)
        for found in result.topics
        if found.name == topic
        for partition in found.partitions
    }


def records(prefix: str, count: int) -> list[Record]:
    return [
        Record(key=b"%s-%d" % (prefix.encode(), i), value=os.urandom(1000), timestamp_ms=now_ms())
        for i in range(count)
    ]


def test_a_replica_moves_to_another_log_dir_while_it_is_produced_to(start_server, tmp_path):
    first, second = tmp_path / "disk-a", tmp_path / "disk-b"
    server = start_server(
        log_dirs=f"{first},{second}",
        log_segment_delete_delay_ms="0",
        log_retention_check_interval_ms="200",
    )
    topic = unique_topic("move-dirs")
    rdkafka.create_topic(
        server.bootstrap_servers, topic, partitions=1, config={"segment.bytes": "1048576"}
    )
    acknowledged = rdkafka.produce(server.bootstrap_servers, topic, records("before", 4000))

    stop = threading.Event()
    during: list[Record] = []
    failures: list[BaseException] = []

    def keep_producing() -> None:
        try:
            round_ = 0
            while not stop.is_set():
                during.extend(
                    rdkafka.produce(server.bootstrap_servers, topic, records(f"r{round_}", 300))
                )
                round_ += 1
        except BaseException as error:
            failures.append(error)

    with Connection(server.host, server.port) as connection:
        [(source, _future)] = placement(connection, topic)
        target = str(second) if source == str(first) else str(first)
        producer = threading.Thread(target=keep_producing, daemon=True)
        producer.start()
        wait_until(lambda: len(during) >= 300, message="producing during the move")

        answers = alter_replica_log_dirs(
            connection,
            [
                (target, topic, [0]),
                ("relative/dir", topic, [1]),
                (str(tmp_path / "not-a-log-dir"), topic, [2]),
                (target, topic, [3, 3]),
            ],
        )
        assert answers == [
            (topic, 0, ErrorCode.none),
            (topic, 1, ErrorCode.log_dir_not_found),
            (topic, 2, ErrorCode.log_dir_not_found),
            (topic, 3, ErrorCode.invalid_request),
            (topic, 3, ErrorCode.invalid_request),
        ]
        seen: list[set[tuple[str, bool]]] = []

        def moved() -> bool:
            seen.append(placement(connection, topic))
            return seen[-1] == {(target, False)}

        wait_until(moved, timeout=60, message=f"the replica in {target}: {seen[-1:]}")
        assert (target, True) in set().union(*seen), "DescribeLogDirs never showed the future"
        wait_until(lambda: len(during) >= 1200, message="producing after the move")
        stop.set()
        producer.join(60)
        assert not failures, failures
        # moving it where it is is nothing to do
        assert alter_replica_log_dirs(connection, [(target, topic, [0])]) == [
            (topic, 0, ErrorCode.none)
        ]

    every = acknowledged + during
    consumed = rdkafka.consume_all(server.bootstrap_servers, topic, every, partitions=1)
    assert_same_records(every, consumed)
    source_dir = first if target == str(second) else second
    assert not (source_dir / f"{topic}-0").exists()
    wait_until(
        lambda: not [name for name in os.listdir(source_dir) if name.startswith(topic)],
        message="the old replica's directory removed",
    )
    assert sorted(os.listdir(f"{target}/{topic}-0"))[0] == "00000000000000000000.index"
    output = server.output_tail(2000)
    assert f"moved {topic}-0 from" in output
    assert "Traceback" not in output


def test_a_server_killed_during_a_move_restarts_with_one_whole_replica(start_server, tmp_path):
    first, second = tmp_path / "disk-a", tmp_path / "disk-b"
    server = start_server(log_dirs=f"{first},{second}")
    topic = unique_topic("move-killed")
    rdkafka.create_topic(
        server.bootstrap_servers, topic, partitions=1, config={"segment.bytes": "1048576"}
    )
    acknowledged = rdkafka.produce(server.bootstrap_servers, topic, records("before", 8000))

    # SIGKILL as soon as the copy is seen (before the commit, most likely), then a little later
    for delay in (0.0, 0.05, 0.2):
        with Connection(server.host, server.port) as connection:
            [(source, _future)] = placement(connection, topic)
            target = str(second) if source == str(first) else str(first)
            answers = alter_replica_log_dirs(connection, [(target, topic, [0])])
            assert answers == [(topic, 0, ErrorCode.none)]
            future = (target, True)
            wait_until(lambda: future in placement(connection, topic))  # noqa: B023
            time.sleep(delay)
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        server.process = None
        server.start()

        with Connection(server.host, server.port) as connection:
            [(where, is_future)] = placement(connection, topic)
        assert not is_future and where in (source, target)
        leftovers = [
            name
            for directory in (first, second)
            for name in os.listdir(directory)
            if name.startswith(topic) and name != f"{topic}-0"
        ]
        assert not [name for name in leftovers if name.endswith("-future")], leftovers
        consumed = rdkafka.consume_all(server.bootstrap_servers, topic, acknowledged, partitions=1)
        assert_same_records(acknowledged, consumed)
        more = rdkafka.produce(server.bootstrap_servers, topic, records(f"after{delay}", 50))
        acknowledged += more


def set_move_throttle(connection: Connection, value: str | None) -> None:
    """IncrementalAlterConfigs v1 of broker 1's replica.alter.log.dirs.io.max.bytes.per.second
    (None: deleted), as kafka-reassign-partitions sets and clears it."""
    response = connection.request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "1",
                    "configs": [
                        {
                            "name": "replica.alter.log.dirs.io.max.bytes.per.second",
                            "config_operation": 0 if value is not None else 1,
                            "value": value,
                        }
                    ],
                }
            ],
        },
    )
    assert response.responses[0].error_code == ErrorCode.none, response


def test_the_move_throttle_holds_a_move_back_until_it_is_lifted(start_server, tmp_path):
    """replica.alter.log.dirs.io.max.bytes.per.second: 2 MB moving at 100 kB/s (windows of 1 s,
    two of them: a fresh quota lets 100 kB through at once) take some 20 s, where they take a
    fraction of a second unthrottled; deleting the throttle lets the move finish."""
    first, second = tmp_path / "disk-a", tmp_path / "disk-b"
    server = start_server(
        log_dirs=f"{first},{second}", alter_log_dirs_replication_quota_window_num="2"
    )
    topic = unique_topic("move-throttled")
    rdkafka.create_topic(server.bootstrap_servers, topic, partitions=1)
    rdkafka.produce(server.bootstrap_servers, topic, records("before", 2000))
    with Connection(server.host, server.port) as connection:
        set_move_throttle(connection, "100000")
        [(source, _future)] = placement(connection, topic)
        target = str(second) if source == str(first) else str(first)
        assert alter_replica_log_dirs(connection, [(target, topic, [0])]) == [
            (topic, 0, ErrorCode.none)
        ]
        copying = {(source, False), (target, True)}
        wait_until(lambda: placement(connection, topic) == copying, message="the move started")
        started = time.monotonic()
        seen: list[set[tuple[str, bool]]] = []

        def held_for_two_seconds() -> bool:
            seen.append(placement(connection, topic))
            return time.monotonic() - started > 2

        wait_until(held_for_two_seconds, message="two seconds of the move")
        assert all(found == copying for found in seen), f"not held back: {seen[-1]}"
        set_move_throttle(connection, None)
        wait_until(
            lambda: placement(connection, topic) == {(target, False)},
            message="the move finished once the throttle was deleted",
        )
