import asyncio
import os
import uuid

import pytest

from moldau.clock import ManualClock
from moldau.config.values import BrokerConfig
from moldau.controller import QuorumController, quorum_controller
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    BrokerHeartbeat,
    BrokerRegistration,
    ConfigResource,
    IncrementalAlterConfigsResource,
    IsrMember,
    IsrProposal,
    NewTopic,
)
from moldau.controller.quorum_controller import metadata_log_directory
from moldau.metadata.records import BrokerEndpoint, ConfigResourceType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.file_log import LOG_FILE_NAME
from moldau.raft.meta_properties import StorageFormatError, read_meta_properties
from moldau.raft.quorum_state import FileQuorumStateStore


def config_for(tmp_path, **extra):
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "node.id": "1", **extra})


def registration(port=9092):
    return BrokerRegistration(
        broker_id=1,
        incarnation_id=uuid.uuid4(),
        endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port)],
        is_controller=True,
    )


async def open_controller(config):
    return await QuorumController.open(config, ManualClock(), registration=registration())


def test_open_formats_storage_registers_the_broker_and_becomes_controller(tmp_path):
    async def scenario():
        config = config_for(tmp_path)
        async with await open_controller(config) as controller:
            image = controller.image
            properties = read_meta_properties(str(tmp_path / "data"))
            assert image.cluster_id == properties.cluster_id == controller.cluster_id
            assert image.controller_id == 1
            assert (
                image.brokers[1].endpoint("PLAINTEXT").port == 9092 and not image.brokers[1].fenced
            )
            assert image.features["metadata.version"] > 0
            assert controller.registration.broker_epoch == image.brokers[1].broker_epoch
        directory = metadata_log_directory(config)
        assert directory == os.path.join(str(tmp_path / "data"), "__cluster_metadata-0")
        state = FileQuorumStateStore(directory).read()
        assert (state.leader_id, state.epoch) == (1, 1)

    asyncio.run(scenario())


def test_a_reopened_controller_has_the_same_image(tmp_path):
    async def scenario():
        config = config_for(tmp_path)
        controller = await open_controller(config)
        await controller.create_topics(
            [
                NewTopic(name="orders", num_partitions=3, configs={"cleanup.policy": "compact"}),
                NewTopic(name="gone"),
            ]
        )
        await controller.delete_topics(["gone"])
        await controller.incremental_alter_configs(
            [
                IncrementalAlterConfigsResource(
                    resource=ConfigResource(
                        resource_type=ConfigResourceType.BROKER, resource_name=""
                    ),
                    configs=[
                        AlterableConfig(name="log.retention.ms", op=AlterConfigOp.SET, value="1000")
                    ],
                )
            ]
        )
        block = await controller.allocate_producer_ids(1)
        before = controller.image
        await controller.stop()

        reopened = await open_controller(config)
        after = reopened.image
        assert after.topics == before.topics
        assert after.topics_by_id == before.topics_by_id
        assert after.broker_configs == before.broker_configs
        assert after.next_producer_id == before.next_producer_id == block.last_producer_id + 1
        assert after.cluster_id == before.cluster_id
        assert after.brokers[1].broker_epoch > before.brokers[1].broker_epoch
        assert after.offset > before.offset
        assert "gone" not in after.topics
        assert FileQuorumStateStore(metadata_log_directory(config)).read().epoch == 2
        await reopened.stop()

    asyncio.run(scenario())


def test_a_torn_tail_of_the_metadata_log_is_truncated_on_recovery(tmp_path):
    async def scenario():
        config = config_for(tmp_path)
        controller = await open_controller(config)
        await controller.create_topics([NewTopic(name="kept")])
        kept_image = controller.image
        await controller.create_topics([NewTopic(name="torn")])
        await controller.stop()
        path = os.path.join(metadata_log_directory(config), LOG_FILE_NAME)
        with open(path, "r+b") as handle:  # a crash in the middle of writing the last entry
            handle.truncate(os.path.getsize(path) - 5)

        reopened = await open_controller(config)
        assert set(reopened.image.topics) == {"kept"}
        assert reopened.image.topics["kept"] == kept_image.topics["kept"]
        # The log is usable after the cut: a new topic commits and survives another restart.
        [result] = await reopened.create_topics([NewTopic(name="torn")])
        assert result.error_code == ErrorCode.none
        await reopened.stop()
        again = await open_controller(config)
        assert set(again.image.topics) == {"kept", "torn"}
        await again.stop()

    asyncio.run(scenario())


def test_publishers_get_each_commit_as_delta_and_image(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        published = []
        controller.add_publisher(lambda delta, image: published.append((delta, image)))
        await controller.create_topics([NewTopic(name="a", num_partitions=2)])
        await controller.delete_topics(["a"])
        created, deleted = published
        assert set(created[0].created_topics()) == {"a"}
        assert created[1] is not deleted[1] and "a" in created[1].topics
        assert [t.name for t in deleted[0].deleted_topics().values()] == ["a"]
        assert deleted[1] is controller.image
        await controller.stop()

    asyncio.run(scenario())


def test_a_failing_publisher_does_not_stop_the_others(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        seen = []

        def broken(delta, image):
            raise RuntimeError("publisher bug")

        controller.add_publisher(broken)
        controller.add_publisher(lambda delta, image: seen.append(image.offset))
        await controller.create_topics([NewTopic(name="a")])
        assert seen == [controller.image.offset]
        await controller.stop()

    asyncio.run(scenario())


def test_concurrent_creates_of_one_name_let_exactly_one_win(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        outcomes = await asyncio.gather(
            *(controller.create_topics([NewTopic(name="race")]) for _ in range(5))
        )
        assert (
            sorted(r[0].error_code for r in outcomes)
            == [ErrorCode.none] + [ErrorCode.topic_already_exists] * 4
        )
        await controller.stop()

    asyncio.run(scenario())


def test_validate_only_writes_nothing(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        offset = controller.image.offset
        [result] = await controller.create_topics(
            [NewTopic(name="dry", num_partitions=2)], validate_only=True
        )
        assert result.error_code == ErrorCode.none and result.num_partitions == 2
        assert "dry" not in controller.image.topics and controller.image.offset == offset
        await controller.stop()

    asyncio.run(scenario())


def test_metadata_log_dir_is_honoured_and_formatted(tmp_path):
    async def scenario():
        config = config_for(tmp_path, **{"metadata.log.dir": str(tmp_path / "meta")})
        controller = await open_controller(config)
        await controller.stop()
        assert os.path.exists(tmp_path / "meta" / "__cluster_metadata-0" / LOG_FILE_NAME)
        assert read_meta_properties(str(tmp_path / "meta")).cluster_id == controller.cluster_id

    asyncio.run(scenario())


def test_storage_of_another_node_or_cluster_is_refused(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        await controller.stop()
        with pytest.raises(StorageFormatError):
            await QuorumController.open(config_for(tmp_path, **{"node.id": "2"}), ManualClock())
        with pytest.raises(StorageFormatError):
            await QuorumController.open(
                config_for(tmp_path, **{"cluster.id": "another-cluster-id-xx"}), ManualClock()
            )

    asyncio.run(scenario())


def test_a_stopped_controller_refuses_operations(tmp_path):
    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        await controller.stop()
        with pytest.raises(RuntimeError):
            await controller.create_topics([NewTopic(name="late")])

    asyncio.run(scenario())


def test_alter_partition_commits_and_answers_the_committed_state(tmp_path):
    async def scenario():
        async with await open_controller(config_for(tmp_path)) as controller:
            await controller.create_topics([NewTopic(name="t", num_partitions=1)])
            topic = controller.image.topics["t"]
            broker_epoch = controller.image.brokers[1].broker_epoch
            change = IsrProposal(
                topic_id=topic.topic_id,
                partition=0,
                leader_epoch=0,
                partition_epoch=0,
                new_isr=[IsrMember(broker_id=1, broker_epoch=broker_epoch)],
                leader_recovery_state=0,
            )
            [result] = await controller.alter_partition(
                broker_id=1, broker_epoch=broker_epoch, changes=[change]
            )
            assert (result.error_code, result.leader_id, result.isr) == (ErrorCode.none, 1, (1,))
            with pytest.raises(KafkaError) as caught:
                await controller.alter_partition(
                    broker_id=1, broker_epoch=broker_epoch + 1, changes=[change]
                )
            assert caught.value.code == ErrorCode.stale_broker_epoch

    asyncio.run(scenario())


def test_stop_waits_a_bounded_time_for_a_write_that_cannot_commit(tmp_path, monkeypatch):
    """As on a leader whose quorum lost its majority: the write in flight never commits. Stopping
    gives it a while, then stops the quorum node, which fails the write's caller."""
    monkeypatch.setattr(quorum_controller, "STOP_COMMIT_WAIT_S", 0.2)

    async def scenario():
        controller = await open_controller(config_for(tmp_path))
        controller.driver._schedule_flush = lambda: None  # nothing becomes durable: no commit
        creating = asyncio.ensure_future(controller.create_topics([NewTopic(name="never")]))
        await asyncio.sleep(0.05)
        assert not creating.done()
        await asyncio.wait_for(controller.stop(), timeout=5)
        with pytest.raises((KafkaError, RuntimeError)):
            await creating

    asyncio.run(scenario())


def other_broker(broker_id=2):
    """A new incarnation of another broker (registered fenced, its session started)."""
    return BrokerRegistration(
        broker_id=broker_id,
        incarnation_id=uuid.uuid4(),
        endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9192)],
    )


@pytest.mark.parametrize("jump_ms", [3_600_000, -3_600_000])
def test_broker_sessions_run_on_monotonic_time_not_the_wall_clock(tmp_path, jump_ms):
    """A wall-clock step on the active controller neither ends a live broker's session (a second
    incarnation is refused as a duplicate) nor keeps a silent one alive past its timeout."""

    async def scenario():
        clock = ManualClock()
        config = config_for(tmp_path)
        session_ms = int(config.get("broker.session.timeout.ms"))
        async with await QuorumController.open(
            config, clock, registration=registration()
        ) as controller:
            registered = await controller.register_broker(other_broker())
            heartbeat = BrokerHeartbeat(
                broker_id=2,
                broker_epoch=registered.broker_epoch,
                current_metadata_offset=controller.image.offset + 1,
            )
            assert not (await controller.broker_heartbeat(heartbeat)).is_fenced
            clock.jump_wall(jump_ms)
            with pytest.raises(KafkaError) as caught:
                await controller.register_broker(other_broker())
            assert caught.value.code == ErrorCode.duplicate_broker_registration
            clock.advance(session_ms + 1)
            result = await controller.register_broker(other_broker())
            assert result.broker_id == 2

    asyncio.run(scenario())
