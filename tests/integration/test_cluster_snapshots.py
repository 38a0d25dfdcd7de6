"""Metadata snapshots in a cluster of real processes (KIP-630): nodes snapshot their image and trim
their metadata log, and a node that was down while the others trimmed theirs catches up from
the leader's snapshot (FetchSnapshot), then acts on it as on any other change. Meanwhile `moldau cluster info` shows it fenced and
lagging, through brokers and through controllers alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, Cluster, build_cluster, wait_for
from .test_cli_support import moldau
from .test_cluster_quorum import FAST, _leader, _live_brokers
from .wire import Connection

# A few topic creations are enough to make every node snapshot and trim its log.
SNAPSHOT_OFTEN = {**FAST, "metadata.log.max.record.bytes.between.snapshots": "4096"}


def _metadata_dir(cluster: Cluster, node_id: int) -> Path:
    return cluster.nodes[node_id].data_dir / "__cluster_metadata-0"


def _log_start(cluster: Cluster, node_id: int) -> int:
    path = _metadata_dir(cluster, node_id) / "log-start"
    return int(json.loads(path.read_text())["offset"]) if path.exists() else 0


def _log_end_of_stopped_node(cluster: Cluster, node_id: int) -> int:
    from moldau.raft.file_log import FileReplicatedLog

    log = FileReplicatedLog(str(_metadata_dir(cluster, node_id)))
    try:
        return log.end_offset
    finally:
        log.close()


def _topics_on(bootstrap: str) -> set[str]:
    """The topics one broker's own metadata image holds (Metadata v12 sent to it alone)."""
    host, port = bootstrap.split(":")
    with Connection(host, int(port), timeout=10) as connection:
        response = connection.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {topic.name for topic in response.topics}


def _partition_dirs(cluster: Cluster, node_id: int, topic: str) -> list[str]:
    """The partition logs a node hosts (not those renamed `*-delete` on their way out)."""
    return sorted(
        p.name
        for p in cluster.nodes[node_id].data_dir.glob(f"{topic}-*")
        if re.fullmatch(rf"{re.escape(topic)}-\d+", p.name)
    )


def test_a_node_behind_the_trimmed_logs_catches_up_from_the_leaders_snapshot(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=SNAPSHOT_OFTEN)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # A topic with a replica on every node, deleted while node 3 is down.
    admin.create_topics([NewTopic("doomed", 3, 3)])["doomed"].result(15)
    wait_for(
        lambda: len(_partition_dirs(cluster, 3, "doomed")) == 3,
        timeout_s=15,
        what="node 3 hosting the replicas of 'doomed'",
    )
    leader = _leader(cluster)
    lagging = next(n for n in (3, 2, 1) if n != leader)
    cluster.stop(lagging)
    behind_at = _log_end_of_stopped_node(cluster, lagging)
    others = [n for n in cluster.nodes if n != lagging]
    up = cluster.nodes[others[0]].bootstrap
    admin = AdminClient({"bootstrap.servers": up})
    admin.delete_topics(["doomed"])["doomed"].result(15)
    created = [f"while-down-{i}" for i in range(25)]
    for name in created:
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    # Every other node snapshotted and trimmed its log past where the lagging node stopped.
    wait_for(
        lambda: all(_log_start(cluster, n) > behind_at for n in others),
        timeout_s=20,
        what=f"the logs of nodes {others} trimmed past offset {behind_at}",
    )
    assert all(list(_metadata_dir(cluster, n).glob("*.checkpoint")) for n in others)
    # What `moldau cluster info` shows meanwhile: the node fenced, and behind in the quorum.
    info = moldau("cluster", "info", "--format", "json", bootstrap=up).json()
    assert {b["node_id"]: b["fenced"] for b in info["brokers"]} == {
        n: n == lagging for n in cluster.nodes
    }
    voters = {c["node_id"]: c for c in info["controllers"]}
    assert voters[info["quorum"]["leader_id"]]["status"] == "Leader"
    assert voters[lagging]["status"] == "Follower" and voters[lagging]["lag"] > 0
    controller_port = cluster.nodes[others[0]].controller_port
    by_controllers = moldau(
        "cluster",
        "info",
        "--bootstrap-controller",
        f"127.0.0.1:{controller_port}",
        "--format",
        "json",
        bootstrap=None,
    ).json()
    assert by_controllers["cluster_id"] == info["cluster_id"] == cluster.cluster_id
    assert by_controllers["quorum"]["leader_id"] == info["quorum"]["leader_id"]
    assert {c["endpoint"] for c in by_controllers["controllers"]} == {
        f"127.0.0.1:{node.controller_port}" for node in cluster.nodes.values()
    }

    cluster.launch([lagging])
    node = cluster.nodes[lagging]
    output = node.server.output_tail(400)
    assert "installed the leader's snapshot" in output, output
    wait_for(
        lambda: (
            set(created) <= _topics_on(node.bootstrap)
            and "doomed" not in _topics_on(node.bootstrap)
        ),
        timeout_s=20,
        what=f"node {lagging}'s image caught up",
    )
    # It acted on the new image as on any change: the deleted topic's logs are gone.
    wait_for(
        lambda: _partition_dirs(cluster, lagging, "doomed") == [],
        timeout_s=15,
        what=f"node {lagging} deleting the logs of 'doomed'",
    )
    wait_for(lambda: lagging in _live_brokers(up), timeout_s=20, what=f"broker {lagging} unfenced")
    # And it serves again as a full member: a replica of a new topic, acks=all through it.
    admin.create_topics([NewTopic("after", 1, 3)])["after"].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for index in range(20):
        producer.produce("after", value=b"v%d" % index)
    assert producer.flush(30) == 0
    wait_for(
        lambda: _partition_dirs(cluster, lagging, "after") == ["after-0"],
        timeout_s=15,
        what=f"node {lagging} hosting a replica of 'after'",
    )
    consumer = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": "after-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["after"])
    values = []
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 20:
            break
    consumer.close()
    assert len(values) == 20
