"""A TxnOffsetCommit is verified with the transaction coordinator wherever it runs (KIP-890 part 1,
as Kafka's group coordinator verifies it): offsets of a producer whose ongoing transaction does
not hold the group's partition are refused with INVALID_TXN_STATE, not written.

Found by the chaos suite (partition-leader seed 2, pause-leader seed 8 of the six-fault runs):
a transactional producer's TxnOffsetCommit reached the group's coordinator after the
transaction coordinator, on another broker, had timed its transaction out without the
offsets partition in it. Written, the offsets stayed pending for good (no marker was ever to
come), and the group's read_committed consumer, whose OffsetFetch asks for stable offsets, was
answered UNSTABLE_OFFSET_COMMIT from then on.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol.errors import ErrorCode

from .cluster import COMBINED, Cluster, build_cluster
from .wire import GROUP_KEY, TRANSACTION_KEY, Connection, find_coordinator

SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


def _wire(cluster: Cluster, node_id: int) -> Connection:
    host, port = cluster.nodes[node_id].bootstrap.split(":")
    return Connection(host, int(port))


def _coordinators(cluster: Cluster) -> tuple[str, int, str, int]:
    """A transactional id and a group whose coordinators are different brokers."""
    with _wire(cluster, 1) as wire:
        groups = {f"group-{i}": find_coordinator(wire, f"group-{i}", GROUP_KEY) for i in range(20)}
        transactions = {
            f"txn-{i}": find_coordinator(wire, f"txn-{i}", TRANSACTION_KEY) for i in range(20)
        }
    for txn_id, txn_coordinator in transactions.items():
        for group, group_coordinator in groups.items():
            assert txn_coordinator.error_code == 0 and group_coordinator.error_code == 0
            if txn_coordinator.node_id != group_coordinator.node_id:
                return txn_id, txn_coordinator.node_id, group, group_coordinator.node_id
    raise AssertionError("every transactional id and group share a coordinator")


def _txn_offset_commit(wire: Connection, txn_id: str, group: str, pid: int, epoch: int) -> int:
    answer = wire.request(
        28,
        3,
        {
            "transactional_id": txn_id,
            "group_id": group,
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "events",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    return int(answer.topics[0].partitions[0].error_code)


def test_offsets_outside_the_ongoing_transaction_are_refused_across_brokers(
    start_server, tmp_path: Path
) -> None:
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=SETTINGS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("events", 1, 3)])["events"].result(15)
    txn_id, txn_node, group, group_node = _coordinators(cluster)
    with _wire(cluster, txn_node) as transactions, _wire(cluster, group_node) as groups:
        started = transactions.request(
            22, 1, {"transactional_id": txn_id, "transaction_timeout": 60_000}
        )
        assert started.error_code == 0, started
        pid, epoch = int(started.producer_id), int(started.producer_epoch)

        # No AddOffsetsToTxn: the group's partition is not in the transaction.
        code = _txn_offset_commit(groups, txn_id, group, pid, epoch)
        assert code == ErrorCode.invalid_txn_state, ErrorCode(code)

        added = transactions.request(
            25,
            1,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
             "group_id": group},
        )  # fmt: skip
        assert added.error_code == 0, added
        assert _txn_offset_commit(groups, txn_id, group, pid, epoch) == ErrorCode.none
