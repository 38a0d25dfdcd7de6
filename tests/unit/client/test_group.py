"""Classic group membership against a scripted coordinator (no sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from moldau.client.config import ClientConfig
from moldau.client.consumer_protocol import decode_subscription, encode_assignment
from moldau.client.errors import ErrorCode
from moldau.client.group import GroupMembership
from moldau.types import TopicPartition as TP

JOIN_GROUP, SYNC_GROUP = 11, 14


class ScriptedCoordinator:
    """Answers JoinGroup like Kafka's coordinator for a lone member (KIP-394) and records syncs."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.requests: list[tuple[int, dict[str, Any]]] = []

    async def coordinator_request(
        self, key: str, api_key: int, data: dict[str, Any], **_: Any
    ) -> Any:
        self.requests.append((api_key, dict(data)))
        if api_key == JOIN_GROUP:
            if not data["member_id"]:
                return SimpleNamespace(error_code=ErrorCode.member_id_required, member_id="m-1")
            metadata = data["protocols"][0]["metadata"]
            return SimpleNamespace(
                error_code=ErrorCode.none,
                member_id=data["member_id"],
                generation_id=3,
                leader=data["member_id"],
                skip_assignment=False,
                members=[SimpleNamespace(member_id=data["member_id"], metadata=metadata)],
            )
        if api_key == SYNC_GROUP:
            (mine,) = data["assignments"]
            return SimpleNamespace(error_code=ErrorCode.none, assignment=mine["assignment"])
        raise AssertionError(f"unexpected api key {api_key}")

    async def refresh_metadata(self, topics: list[str]) -> Any:
        return SimpleNamespace(
            topics={
                t: SimpleNamespace(partitions=dict.fromkeys(range(self.partitions))) for t in topics
            }
        )

    def forget_coordinator(self, key: str) -> None:
        pass


def test_lone_member_rejoins_with_its_member_id_and_assigns_itself_everything() -> None:
    coordinator = ScriptedCoordinator(partitions=3)
    config = ClientConfig({"retry.backoff.ms": 1, "heartbeat.interval.ms": 60000})

    async def scenario() -> list[TP]:
        membership = GroupMembership(coordinator, config, "g")  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        try:
            return await membership.join(["orders"], deadline=loop.time() + 5)
        finally:
            await membership.stop_heartbeats()

    assignment = asyncio.run(scenario())
    assert assignment == [TP("orders", 0), TP("orders", 1), TP("orders", 2)]
    joins = [data for api, data in coordinator.requests if api == JOIN_GROUP]
    assert [j["member_id"] for j in joins] == ["", "m-1"]
    assert decode_subscription(joins[1]["protocols"][0]["metadata"]).topics == ("orders",)
    (sync,) = [data for api, data in coordinator.requests if api == SYNC_GROUP]
    assert (sync["generation_id"], sync["member_id"]) == (3, "m-1")
    assert sync["assignments"][0]["assignment"] == encode_assignment(assignment)
