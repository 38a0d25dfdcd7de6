"""A forged quorum message on a real three-node cluster: the probe's BeginQuorumEpoch v0 (57
bytes after the size prefix, no cluster id) naming another voter leader of the current epoch, sent to the quorum
leader's controller listener. Once it made the leader fail (RaftSafetyError): it stayed up,
still said it led, answered no quorum request again and its broker was fenced. Now it is
answered with INVALID_REQUEST and the quorum goes on as before."""

from __future__ import annotations

import struct
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.protocol.errors import ErrorCode

from .cluster import COMBINED, LOOPBACK, build_cluster
from .test_cluster_quorum import FAST, _quorum
from .wire import Connection

BEGIN_QUORUM_EPOCH = 53
# What the probe sent to leader 1 of epoch 1, naming voter 2.
PROBE = (
    "000000390035000000000001000570726f6265ffff0000000100125f5f636c75737465725f6d65746164617461"
    "00000001000000000000000200000001"
)


def probe_packet(*, claimed_leader: int, epoch: int) -> bytes:
    """The probe's bytes, with another voter's id and the current epoch in place of its 2 and 1:
    size 57, BeginQuorumEpoch v0, correlation id 1, client id "probe", a null cluster id, one
    topic `__cluster_metadata` with partition 0 naming `claimed_leader` leader of `epoch`."""
    topic = b"__cluster_metadata"
    body = (
        struct.pack(">hhi", BEGIN_QUORUM_EPOCH, 0, 1)
        + struct.pack(">h", 5)
        + b"probe"
        + struct.pack(">h", -1)
        + struct.pack(">ih", 1, len(topic))
        + topic
        + struct.pack(">iiii", 1, 0, claimed_leader, epoch)
    )
    return struct.pack(">i", len(body)) + body


def test_the_probes_packet_is_refused_and_the_leader_leads_on(start_server, tmp_path: Path):
    cluster = build_cluster(start_server, tmp_path, roles=[COMBINED] * 3, extra=FAST)
    quorum = _quorum(cluster.nodes[1].bootstrap)
    leader_id, epoch = int(quorum.leader_id), int(quorum.leader_epoch)
    voters = sorted(int(v.replica_id) for v in quorum.current_voters)
    other = next(v for v in voters if v != leader_id)
    assert probe_packet(claimed_leader=2, epoch=1).hex() == PROBE
    packet = probe_packet(claimed_leader=other, epoch=epoch)
    assert struct.unpack(">i", packet[:4]) == (57,) and len(packet) == 4 + 57
    leader = cluster.nodes[leader_id]
    assert leader.controller_port is not None
    with Connection(LOOPBACK, leader.controller_port, timeout=10) as connection:
        for _ in range(3):  # answered every time: the node still takes part
            correlation_id, answer = connection.exchange(BEGIN_QUORUM_EPOCH, 0, packet)
            assert correlation_id == 1
            assert answer.error_code == ErrorCode.none
            [topic] = answer.topics
            [partition] = topic.partitions
            assert partition.error_code == ErrorCode.invalid_request
            assert (partition.leader_id, partition.leader_epoch) == (leader_id, epoch)
    # The same lie to the followers, which have heard from their leader: refused too.
    for node in cluster.nodes.values():
        if node.node_id != leader_id and node.controller_port is not None:
            claimed = next(v for v in voters if v not in (leader_id, node.node_id))
            with Connection(LOOPBACK, node.controller_port, timeout=10) as connection:
                packet = probe_packet(claimed_leader=claimed, epoch=epoch)
                _, answer = connection.exchange(BEGIN_QUORUM_EPOCH, 0, packet)
                [partition] = answer.topics[0].partitions
                assert partition.error_code == ErrorCode.invalid_request
                assert (partition.leader_id, partition.leader_epoch) == (leader_id, epoch)
    # The leader still leads the same epoch (no election), and the quorum still commits.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("after-the-probe", 3, 3)])["after-the-probe"].result(30)
    metadata = admin.list_topics(topic="after-the-probe", timeout=10)
    assert len(metadata.topics["after-the-probe"].partitions) == 3
    for node in cluster.nodes.values():
        seen = _quorum(node.bootstrap)
        assert (int(seen.leader_id), int(seen.leader_epoch)) == (leader_id, epoch)
        assert int(seen.high_watermark) > int(quorum.high_watermark)
