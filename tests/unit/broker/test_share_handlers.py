"""The share group handlers over a real group coordinator runtime: off (UNSUPPORTED_VERSION)
until share.version is finalized at 1, as Kafka 4.1; a member's heartbeat with the group's own
settings over the broker's; describing; share session refusals at the top level."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from moldau.config.share_groups import ShareGroupConfig
from moldau.coordinator.runtime import GroupCoordinatorRuntime
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.test_group_handlers import TOPIC_ID, FakeNode, call, run


class ShareNode(FakeNode):
    def __init__(self, runtime: GroupCoordinatorRuntime, *, share_version: int = 1) -> None:
        super().__init__(runtime)
        self.metadata_image.features = MappingProxyType({"share.version": share_version})
        self.metadata_image.group_configs = MappingProxyType(
            {"g": {"share.heartbeat.interval.ms": "7000"}}
        )
        self.share_group_config = ShareGroupConfig(max_size=2)
        self.share_partitions = None
        self.client_id = "client"


def heartbeat(member: str, epoch: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "group_id": fields.pop("group_id", "g"),
        "member_id": member,
        "member_epoch": epoch,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
        **fields,
    }


FETCH = {
    "group_id": "g",
    "member_id": "m",
    "share_session_epoch": 0,
    "max_wait": 0,
    "min_bytes": 1,
    "max_records": 10,
    "batch_size": 10,
    "topics": [],
    "forgotten_topics_data": [],
}


@pytest.mark.parametrize(
    ("api_key", "body", "error_of"),
    [
        (ApiKey.SHARE_GROUP_HEARTBEAT, heartbeat("m"), lambda r: r.error_code),
        (
            ApiKey.SHARE_GROUP_DESCRIBE,
            {"group_ids": ["g"], "include_authorized_operations": False},
            lambda r: r.groups[0].error_code,
        ),
        (ApiKey.SHARE_FETCH, FETCH, lambda r: r.error_code),
        (
            ApiKey.SHARE_ACKNOWLEDGE,
            {"group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": []},
            lambda r: r.error_code,
        ),
    ],
)
def test_share_apis_are_off_until_share_version_1(
    api_key: ApiKey, body: Any, error_of: Any
) -> None:
    async def scenario(node: FakeNode) -> None:
        off = ShareNode(node.group_coordinator, share_version=0)  # type: ignore[arg-type]
        answer = await call(off, api_key, 1, body)
        assert error_of(answer) == ErrorCode.unsupported_version

    run(scenario)


def test_a_member_joins_with_the_groups_own_settings_and_is_described() -> None:
    async def scenario(node: FakeNode) -> None:
        share = ShareNode(node.group_coordinator)  # type: ignore[arg-type]
        joined = await call(share, ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("a"))
        assert joined.error_code == ErrorCode.none
        assert joined.heartbeat_interval.total_seconds() == 7  # the group's config
        assert [(e.topic_id, e.partitions) for e in joined.assignment.topic_partitions] == [
            (TOPIC_ID, (0, 1))
        ]
        await call(share, ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("b"))
        full = await call(share, ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("c"))
        assert full.error_code == ErrorCode.group_max_size_reached  # group.share.max.size 2
        described = await call(
            share,
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            {"group_ids": ["g", "nothing"], "include_authorized_operations": True},
        )
        group, missing = described.groups
        assert (group.group_state, group.assignor_name) == ("Stable", "simple")
        assert sorted(m.member_id for m in group.members) == ["a", "b"]
        assert group.members[0].assignment.topic_partitions[0].topic_name == "t"
        assert missing.error_code == ErrorCode.group_id_not_found
        listed = await call(share, ApiKey.LIST_GROUPS, 5, {"types_filter": ["share"]})
        assert [(g.group_id, g.group_type) for g in listed.groups] == [("g", "share")]

    run(scenario)
