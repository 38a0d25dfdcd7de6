import asyncio
import os
import uuid

from moldau.clock import SYSTEM_CLOCK
from moldau.controller import QuorumController
from moldau.controller.metadata_storage import metadata_log_directory
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResource,
    IncrementalAlterConfigsResource,
    NewTopic,
)
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.records import (
    ConfigResourceType,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from moldau.metadata.snapshot import encode_snapshot
from moldau.raft.file_snapshots import parse_snapshot_file_name
from moldau.raft.log import OffsetAndEpoch
from tests.unit.controller.test_quorum_controller import config_for, open_controller, registration

# Small enough that a few topic creations make a snapshot.
FREQUENT = {"metadata.log.max.record.bytes.between.snapshots": "2000"}


async def wait_for_snapshot(controller, count=1, timeout_s=5.0):
    generator = controller.snapshot_generator
    deadline = asyncio.get_running_loop().time() + timeout_s
    while len(generator.written) < count:
        assert asyncio.get_running_loop().time() < deadline, "no snapshot was written"
        await asyncio.sleep(0.01)
    return generator.written[-1]


def test_snapshots_trim_the_log_and_a_restart_loads_the_newest_then_the_tail(tmp_path):
    async def scenario():
        config = config_for(tmp_path, **FREQUENT)
        controller = await open_controller(config)
        for index in range(12):
            await controller.create_topics([NewTopic(name=f"t{index}", num_partitions=2)])
        await controller.delete_topics(["t3"])
        await controller.incremental_alter_configs(
            [
                IncrementalAlterConfigsResource(
                    resource=ConfigResource(
                        resource_type=ConfigResourceType.TOPIC, resource_name="t1"
                    ),
                    configs=[AlterableConfig(name="retention.ms", op=AlterConfigOp.SET, value="5")],
                )
            ]
        )
        await controller.allocate_producer_ids(1)
        snapshot_id = await wait_for_snapshot(controller)
        driver = controller.driver
        assert driver.log.log_start.offset >= snapshot_id.offset > 0
        directory = metadata_log_directory(config)
        on_disk = sorted(
            parse_snapshot_file_name(name)[0].offset
            for name in os.listdir(directory)
            if name.endswith(".checkpoint")
        )
        # The older snapshots went with the log they covered; a newer one may be on its way
        # (stored, not yet trimmed to).
        assert on_disk[0] == driver.log.log_start.offset
        # Written after the latest snapshot: only in the log's tail.
        [tail] = await controller.create_topics([NewTopic(name="after-the-snapshot")])
        before = controller.image
        await controller.stop()
        newest = driver.snapshots.latest_snapshot_id()  # perhaps written as it stopped

        reopened = await open_controller(config)
        after = reopened.image
        # It starts at the newest snapshot, or at one it has made since from the tail it
        # replayed and its registration.
        start = reopened.driver.log.log_start
        assert start.offset >= newest.offset
        assert start in reopened.driver.snapshots.snapshot_ids()
        assert after.topics == before.topics and "t3" not in after.topics
        assert after.topics["after-the-snapshot"].topic_id == tail.topic_id
        assert after.topics["t1"].configs == {"retention.ms": "5"}
        assert after.next_producer_id == before.next_producer_id
        assert after.features == before.features
        assert after.brokers[1].broker_epoch > before.brokers[1].broker_epoch  # re-registered
        await reopened.stop()

    asyncio.run(scenario())


def test_a_snapshot_is_due_after_the_interval_even_without_more_bytes(tmp_path):
    async def scenario():
        config = config_for(
            tmp_path,
            **{
                "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),
                "metadata.log.max.snapshot.interval.ms": "200",
            },
        )
        controller = await QuorumController.open(config, SYSTEM_CLOCK, registration=registration())
        await controller.create_topics([NewTopic(name="lonely")])
        snapshot_id = await wait_for_snapshot(controller)
        assert snapshot_id.offset == controller.image.offset + 1
        assert controller.snapshot_generator.bytes_since_snapshot == 0
        await controller.stop()

    asyncio.run(scenario())


def test_a_snapshot_installed_in_place_of_the_image_is_published_whole(tmp_path):
    """What a follower does with the leader's snapshot: publishers see the new image and a
    delta of what differs (here: a topic the snapshot no longer has, one it adds)."""

    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        await controller.create_topics([NewTopic(name="kept"), NewTopic(name="deleted-meanwhile")])
        leader_image = controller.image
        # The leader's image: one topic deleted, one created (built by hand here).
        delta = MetadataDelta(leader_image)
        delta.replay(RemoveTopicRecord(topic_id=leader_image.topics["deleted-meanwhile"].topic_id))
        new_id = uuid.uuid4()
        delta.replay(TopicRecord(name="created-meanwhile", topic_id=new_id))
        delta.replay(
            PartitionRecord(topic_id=new_id, partition=0, replicas=(1,), isr=(1,), leader=1)
        )
        leader_image = delta.apply()
        published = []
        controller.add_publisher(lambda delta, image: published.append((delta, image)))
        snapshot_id = OffsetAndEpoch(epoch=1, offset=controller.image.offset + 50)
        controller.handle_snapshot(snapshot_id, encode_snapshot(leader_image))
        [(delta, image)] = published
        assert image is controller.image and image.offset == snapshot_id.offset - 1
        assert set(image.topics) == {"kept", "created-meanwhile"}
        assert set(delta.created_topics()) == {"created-meanwhile"}
        assert {t.name for t in delta.deleted_topics().values()} == {"deleted-meanwhile"}
        assert image.controller_id == leader_image.controller_id == 1
        await controller.stop()

    asyncio.run(scenario())
