"""The metadata log on a full disk: operations refused with KAFKA_STORAGE_ERROR before anything
is appended, a reserve file given back to start, and a broker that cannot re-register serving
with the registration it had."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest

from moldau.controller import metadata_reserve
from moldau.controller.metadata_storage import METADATA_RESERVE_BYTES, metadata_log_directory
from moldau.controller.operations import NewTopic, PartitionsIncrease
from moldau.protocol.errors import ErrorCode

from .test_quorum_controller import config_for, open_controller


class _Disk:
    """`os.statvfs` with a free-space figure the test sets (None: the real one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.free: int | None = None
        real: Callable[[Any], os.statvfs_result] = os.statvfs

        def statvfs(path: Any) -> Any:
            result = real(path)
            if self.free is None:
                return result
            values = list(result)
            values[0] = values[1] = 1  # f_bsize, f_frsize
            values[4] = values[3] = self.free  # f_bavail, f_bfree
            return os.statvfs_result(values)

        monkeypatch.setattr(os, "statvfs", statvfs)


def test_operations_that_would_leave_no_room_for_the_metadata_log_are_refused(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _Disk(monkeypatch)

    async def scenario() -> None:
        controller = await open_controller(config_for(tmp_path))
        try:
            [ok] = await controller.create_topics([NewTopic(name="a", num_partitions=1)])
            assert ok.error_code == ErrorCode.none
            disk.free = METADATA_RESERVE_BYTES
            offset = controller.image.offset
            results = await controller.create_topics(
                [NewTopic(name="b"), NewTopic(name="a"), NewTopic(name="c")]
            )
            assert [r.error_code for r in results] == [
                ErrorCode.kafka_storage_error,
                ErrorCode.topic_already_exists,  # its own answer stays
                ErrorCode.kafka_storage_error,
            ]
            [grown] = await controller.create_partitions([PartitionsIncrease(name="a", count=2)])
            assert grown.error_code == ErrorCode.kafka_storage_error
            [deleted] = await controller.delete_topics(["a"])
            assert deleted.error_code == ErrorCode.kafka_storage_error
            assert controller.image.offset == offset and "b" not in controller.image.topics
            disk.free = None
            [created] = await controller.create_topics([NewTopic(name="b")])
            assert created.error_code == ErrorCode.none
        finally:
            await controller.stop()

    asyncio.run(scenario())


def test_a_start_on_a_full_disk_gives_back_part_of_the_reserve_and_keeps_the_registration(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(tmp_path)
    directory = metadata_log_directory(config)
    reserve = os.path.join(directory, metadata_reserve.RESERVE_FILE)

    async def scenario() -> None:
        controller = await open_controller(config)
        epoch = controller.registration.broker_epoch  # type: ignore[union-attr]
        await controller.stop()
        assert os.path.getsize(reserve) == metadata_reserve.RESERVE_BYTES
        disk = _Disk(monkeypatch)
        disk.free = 1000
        controller = await open_controller(config)
        assert os.path.getsize(reserve) == (
            metadata_reserve.RESERVE_BYTES - metadata_reserve.RELEASE_BYTES
        )
        assert controller.registration is None  # refused: the earlier one stands
        assert controller.image.brokers[1].broker_epoch == epoch
        disk.free = None
        assert controller.restore_metadata_reserve()
        assert os.path.getsize(reserve) == metadata_reserve.RESERVE_BYTES
        await controller.stop()

    asyncio.run(scenario())
