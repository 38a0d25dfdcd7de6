"""AlterPartition on the wire: the controller's handler in v2 and v3, and the broker's typed call
(`ControllerChannel.alter_partition`) encoding its request and reading the answer."""

import pytest

from moldau.broker.controller_channel import ControllerChannel
from moldau.broker.handlers.alter_partition import handle_alter_partition
from moldau.broker.quorum_addresses import QuorumAddresses
from moldau.controller.operations import IsrMember, IsrProposal, NewTopic
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

from .test_admin_handlers import Cluster

E = ErrorCode


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.loop.run_until_complete(
        cluster.controller.create_topics([NewTopic(name="t", num_partitions=2)])
    )
    yield cluster
    cluster.close()


def request_body(cluster, version, *, isr, broker_epoch=None, partition_epoch=0):
    epoch = cluster.controller.image.brokers[1].broker_epoch
    topic_id = cluster.controller.image.topics["t"].topic_id
    if version >= 3:
        members = {"new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epoch} for b in isr]}
    else:
        members = {"new_isr": isr}
    return {
        "broker_id": 1,
        "broker_epoch": epoch if broker_epoch is None else broker_epoch,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": index,
                        "leader_epoch": 0,
                        "leader_recovery_state": 0,
                        "partition_epoch": partition_epoch,
                        **members,
                    }
                    for index in (0, 1, 5)
                ],
            }
        ],
    }


@pytest.mark.parametrize("version", [2, 3])
def test_alter_partition_in_every_version(cluster, version):
    response = cluster.call(
        handle_alter_partition,
        ApiKey.ALTER_PARTITION,
        version,
        request_body(cluster, version, isr=[1]),
    )
    assert response.error_code == E.none
    [topic] = response.topics
    assert topic.topic_id == cluster.controller.image.topics["t"].topic_id
    zero, one, unknown = topic.partitions
    assert (zero.error_code, zero.leader_id, zero.isr, zero.partition_epoch) == (E.none, 1, (1,), 0)
    assert one.error_code == E.none
    assert unknown.error_code == E.unknown_topic_or_partition
    stale = cluster.call(
        handle_alter_partition,
        ApiKey.ALTER_PARTITION,
        version,
        request_body(cluster, version, isr=[1], broker_epoch=4242),
    )
    assert (stale.error_code, stale.topics) == (E.stale_broker_epoch, ())
    ahead = cluster.call(
        handle_alter_partition,
        ApiKey.ALTER_PARTITION,
        version,
        request_body(cluster, version, isr=[1], partition_epoch=3),
    )
    assert [p.error_code for p in ahead.topics[0].partitions][:2] == [E.not_controller] * 2


class RemoteController:
    """What a channel reads of the local quorum member when another node is the active one."""

    is_active = False


def test_the_brokers_call_encodes_v3_and_reads_each_partitions_answer(cluster):
    channel = ControllerChannel(RemoteController(), QuorumAddresses(), node_id=1)

    async def over_the_wire(api_key, body, **_options):
        return await cluster.call_async(handle_alter_partition, api_key, 3, body)

    channel._call = over_the_wire
    image = cluster.controller.image
    epoch = image.brokers[1].broker_epoch
    topic_id = image.topics["t"].topic_id

    def change(index, partition_epoch=0):
        return IsrProposal(
            topic_id=topic_id,
            partition=index,
            leader_epoch=0,
            partition_epoch=partition_epoch,
            new_isr=[IsrMember(broker_id=1, broker_epoch=epoch)],
        )

    results = cluster.loop.run_until_complete(
        channel.alter_partition(
            broker_id=1, broker_epoch=epoch, changes=[change(1), change(0, partition_epoch=9)]
        )
    )
    assert [(r.partition, r.error_code) for r in results] == [(1, E.none), (0, E.not_controller)]
    assert (results[0].leader_id, results[0].isr, results[0].leader_epoch) == (1, (1,), 0)
    with pytest.raises(KafkaError) as caught:
        cluster.loop.run_until_complete(
            channel.alter_partition(broker_id=1, broker_epoch=epoch + 7, changes=[change(1)])
        )
    assert caught.value.code == E.stale_broker_epoch
