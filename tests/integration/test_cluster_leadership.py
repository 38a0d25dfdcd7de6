"""Partition leadership in a cluster of three combined nodes: when a broker is killed, the active
controller fences it after its session and moves its leaderships to the rest of the ISR; when a
broker stops cleanly, its leaderships move before it goes (controlled shutdown), and when it
comes back and has caught up, the leader rebalance hands them back; a leader cut off by a
network partition is fenced the same way and rejoins once the network heals. What is checked is
the Metadata answer (leader, leader epoch, ISR)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import COMBINED, Cluster, build_cluster, cluster_in_namespaces, wait_for
from .wire import Connection

TOPIC = "replicated"
# (leader, leader epoch, replicas, ISR) as Metadata answers them.
PartitionState = tuple[int, int, tuple[int, ...], tuple[int, ...]]
QUICK = {
    "broker.heartbeat.interval.ms": "500",
    "leader.imbalance.check.interval.seconds": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


def _partitions(bootstrap: str) -> dict[int, PartitionState]:
    """Metadata v12 of TOPIC: partition -> (leader, leader epoch, replicas, ISR)."""
    host, port = bootstrap.split(":")
    with Connection(host, int(port), timeout=10) as connection:
        response = connection.request(
            3,
            12,
            {
                "topics": [{"topic_id": None, "name": TOPIC}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    [topic] = response.topics
    assert topic.error_code == 0, topic
    return {
        int(p.partition_index): (
            int(p.leader_id),
            int(p.leader_epoch),
            tuple(int(b) for b in p.replica_nodes),
            tuple(int(b) for b in p.isr_nodes),
        )
        for p in topic.partitions
    }


def _three_nodes(start_server, tmp_path: Path, *, session_timeout_ms: int) -> Cluster:
    return build_cluster(
        start_server,
        tmp_path,
        roles=[COMBINED] * 3,
        extra={**QUICK, "broker.session.timeout.ms": str(session_timeout_ms)},
    )


def _replicated_topic(cluster: Cluster) -> dict[int, PartitionState]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(15)
    every_broker = [node.bootstrap for node in cluster.brokers()]

    def placed() -> dict | None:
        # (every broker has replayed the creation, with all three replicas in each ISR)
        views = [_partitions(bootstrap) for bootstrap in every_broker]
        complete = len(views[0]) == 3 and all(view == views[0] for view in views)
        if complete and all(sorted(isr) == [1, 2, 3] for _, _, _, isr in views[0].values()):
            return views[0]
        return None

    before = wait_for(placed, timeout_s=15, what="the RF=3 topic on every broker")
    assert {leader for leader, _, _, _ in before.values()} == {1, 2, 3}, before
    return before


def test_a_killed_broker_is_fenced_and_its_leaderships_move_to_the_isr(
    start_server, tmp_path: Path
) -> None:
    cluster = _three_nodes(start_server, tmp_path, session_timeout_ms=3000)
    before = _replicated_topic(cluster)
    victim = before[0][0]
    survivor = next(node for node in cluster.brokers() if node.node_id != victim)
    cluster.kill(victim)

    def moved() -> dict | None:
        after = _partitions(survivor.bootstrap)
        if all(victim not in isr and leader != victim for leader, _, _, isr in after.values()):
            return after
        return None

    after = wait_for(moved, timeout_s=30, what=f"broker {victim}'s leaderships moving")
    for index, (leader, epoch, replicas, isr) in after.items():
        old_leader, old_epoch, old_replicas, old_isr = before[index]
        assert replicas == old_replicas
        assert sorted(isr) == sorted(b for b in old_isr if b != victim)
        if old_leader == victim:
            # The first of the rest of the ISR, in replica order, with a new leader epoch.
            assert leader == next(b for b in replicas if b != victim), (before, after)
            assert epoch == old_epoch + 1
        else:
            assert (leader, epoch) == (old_leader, old_epoch)
    assert (
        victim
        not in AdminClient({"bootstrap.servers": survivor.bootstrap})
        .list_topics(timeout=10)
        .brokers
    )


def test_a_broker_stopping_cleanly_hands_over_its_leaderships_before_it_goes(
    start_server, tmp_path: Path
) -> None:
    # Sessions long enough that only the controlled shutdown can explain the moves.
    cluster = _three_nodes(start_server, tmp_path, session_timeout_ms=120_000)
    before = _replicated_topic(cluster)
    leaving = before[1][0]
    survivor = next(node for node in cluster.brokers() if node.node_id != leaving)
    started = time.monotonic()
    cluster.stop(leaving)
    after = _partitions(survivor.bootstrap)
    assert time.monotonic() - started < 60
    for index, (leader, epoch, _, isr) in after.items():
        assert leader != leaving and leaving not in isr, (before, after)
        if before[index][0] == leaving:
            assert epoch == before[index][1] + 1
    # It comes back as a new incarnation, catches up, its leaders take it back into their ISRs
    # (AlterPartition), and the leader rebalance gives it back the leadership it prefers.
    cluster.launch([leaving])

    def rebalanced() -> dict | None:
        now = _partitions(survivor.bootstrap)
        in_sync = all(sorted(isr) == [1, 2, 3] for _, _, _, isr in now.values())
        return now if in_sync and now[1][0] == leaving else None

    back = wait_for(rebalanced, timeout_s=60, what=f"broker {leaving} back in the lead")
    assert back[1][1] == after[1][1] + 1


def test_an_isolated_leader_acknowledges_nothing_loses_its_leaderships_and_rejoins(
    start_server, tmp_path: Path
) -> None:
    """A network partition, not a crash: the leader of partition 0 keeps running, cut from the
    other nodes (clients still reach it). It cannot commit an acks=all write; the controller on
    the majority side fences it after its session and moves its leaderships; once the network
    heals it follows the new leaders and is back in every ISR."""
    extra = {**QUICK, "broker.session.timeout.ms": "3000"}
    with cluster_in_namespaces(start_server, tmp_path, roles=[COMBINED] * 3, extra=extra) as (
        cluster,
        network,
    ):
        before = _replicated_topic(cluster)
        victim = before[0][0]
        survivor = next(node for node in cluster.brokers() if node.node_id != victim)
        network.isolate(victim)
        outcomes: list[object] = []
        producer = Producer(
            {"bootstrap.servers": cluster.nodes[victim].bootstrap, "acks": "all",
             "message.timeout.ms": 6000}
        )  # fmt: skip
        producer.produce(TOPIC, b"through the isolated leader", partition=0,
                         on_delivery=lambda error, _: outcomes.append(error))  # fmt: skip
        producer.flush(15)
        assert len(outcomes) == 1 and outcomes[0] is not None, outcomes

        def moved() -> dict | None:
            after = _partitions(survivor.bootstrap)
            if all(victim not in isr and leader != victim for leader, _, _, isr in after.values()):
                return after
            return None

        wait_for(moved, timeout_s=30, what=f"isolated broker {victim}'s leaderships moving")
        network.heal()

        def rejoined() -> bool:
            views = [_partitions(node.bootstrap) for node in cluster.brokers()]
            return all(
                leader >= 0 and sorted(isr) == [1, 2, 3]
                for view in views
                for leader, _, _, isr in view.values()
            )

        wait_for(rejoined, timeout_s=60, what=f"broker {victim} back in every ISR after healing")
