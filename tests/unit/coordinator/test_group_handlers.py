"""The group handlers in every version they declare: requests built for that version, responses
encoded for it and decoded back (a None in a field the version cannot carry fails here)."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.broker.registry import RequestContext, handler_for, load_handlers
from moldau.clock import ManualClock
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.runtime import GroupCoordinatorRuntime
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import (
    RequestHeader,
    build_entity,
    decode_response,
    encode_response,
    request_schema,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import subscription

TOPIC_ID = uuid.UUID(int=7)


class FakeNode:
    node_id = 1
    authorization = None  # (no authorizer: everything is allowed)

    def __init__(self, runtime: GroupCoordinatorRuntime) -> None:
        topic = SimpleNamespace(name="t", topic_id=TOPIC_ID, partitions={0: None, 1: None})
        self.group_coordinator = runtime
        self.share_partitions = None
        self.metadata_image = SimpleNamespace(topics={"t": topic}, topics_by_id={TOPIC_ID: topic})
        self.internal_topics = SimpleNamespace(ready=lambda name: True)  # (they exist)

    def broker_endpoints(self, listener_name: str) -> list[dict[str, Any]]:
        return [{"node_id": 1, "host": "broker.example", "port": 9092, "rack": None}]


def run(scenario: Callable[[FakeNode], Awaitable[None]]) -> None:
    async def main() -> None:
        log: list[tuple[bytes | None, bytes | None]] = []

        async def append(tp: Any, pairs: list[tuple[bytes | None, bytes | None]]) -> int:
            log.extend(pairs)
            return len(log) - 1

        runtime = GroupCoordinatorRuntime(
            GroupCoordinatorConfig(group_initial_rebalance_delay_ms=0),
            append=append,
            read_records=lambda tp: [],
            clock=ManualClock(),
        )
        async with runtime:
            await scenario(FakeNode(runtime))

    load_handlers()
    asyncio.run(main())


async def call(node: FakeNode, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
    """Build the request of `version`, run the handler, encode and decode its response."""
    spec = handler_for(api_key)
    assert spec is not None and spec.min_version <= version <= spec.max_version
    schema = request_schema(api_key, version)
    assert schema is not None
    request = build_entity(schema, body)
    header = RequestHeader(int(api_key), version, 1, "client", 0)
    result = spec.function(RequestContext(header=header, node=node), request)  # type: ignore[arg-type]
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, Deferred):  # applied; the answer waits for the rebalance
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        result.then(answer.set_result, answer.set_exception)
        result = await answer
    frame = encode_response(int(api_key), version, 1, result)
    _, response = decode_response(int(api_key), version, frame[4:])
    return response


def versions(api_key: ApiKey) -> list[int]:
    load_handlers()
    spec = handler_for(api_key)
    assert spec is not None
    return list(range(spec.min_version, spec.max_version + 1))


def join_body(member_id: str = "") -> dict[str, Any]:
    return {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("t")}],
    }


async def join(node: FakeNode, version: int) -> Any:
    response = await call(node, ApiKey.JOIN_GROUP, version, join_body())
    if response.error_code == ErrorCode.member_id_required:
        response = await call(node, ApiKey.JOIN_GROUP, version, join_body(response.member_id))
    return response


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        first = await call(node, ApiKey.JOIN_GROUP, version, join_body())
        expected = ErrorCode.member_id_required if version >= 4 else ErrorCode.none
        assert first.error_code == expected
        joined = first
        if version >= 4:
            joined = await call(node, ApiKey.JOIN_GROUP, version, join_body(first.member_id))
        assert joined.error_code == ErrorCode.none
        assert joined.generation_id >= 1
        assert joined.protocol_name == "range"
        assert [member.member_id for member in joined.members] == [joined.member_id]

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group_and_heartbeat_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        joined = await join(node, 5)
        member_id, generation = joined.member_id, joined.generation_id
        synced = await call(
            node,
            ApiKey.SYNC_GROUP,
            version,
            {
                "group_id": "g",
                "generation_id": generation,
                "member_id": member_id,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [{"member_id": member_id, "assignment": b"mine"}],
            },
        )
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
        heartbeat_version = min(version, versions(ApiKey.HEARTBEAT)[-1])
        beat = {"group_id": "g", "generation_id": generation, "member_id": member_id}
        answered = await call(node, ApiKey.HEARTBEAT, heartbeat_version, beat)
        assert answered.error_code == ErrorCode.none
        stale = await call(node, ApiKey.HEARTBEAT, heartbeat_version, {**beat, "generation_id": 99})
        assert stale.error_code == ErrorCode.illegal_generation

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        joined = await join(node, 5)
        body = {
            "group_id": "g",
            "member_id": joined.member_id,
            "members": [{"member_id": joined.member_id}],
        }
        left = await call(node, ApiKey.LEAVE_GROUP, version, body)
        assert left.error_code == ErrorCode.none
        again = await call(node, ApiKey.LEAVE_GROUP, version, body)
        if version >= 3:
            assert again.members[0].error_code == ErrorCode.unknown_member_id
        else:
            assert again.error_code == ErrorCode.unknown_member_id

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_and_fetch_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        topic = {"name": "t", "topic_id": TOPIC_ID}
        committed = await call(
            node,
            ApiKey.OFFSET_COMMIT,
            version,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        **topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 42,
                                "committed_metadata": "m",
                            },
                            {"partition_index": 9, "committed_offset": 1, "committed_metadata": ""},
                        ],
                    }
                ],
            },
        )
        codes = [p.error_code for p in committed.topics[0].partitions]
        missing = (
            ErrorCode.unknown_topic_id if version >= 10 else ErrorCode.unknown_topic_or_partition
        )
        assert codes == [ErrorCode.none, missing]
        fetch_version = min(version, versions(ApiKey.OFFSET_FETCH)[-1])
        wanted = [{**topic, "partition_indexes": [0, 1]}]
        fetched = await call(
            node,
            ApiKey.OFFSET_FETCH,
            fetch_version,
            {"group_id": "g", "topics": wanted, "groups": [{"group_id": "g", "topics": wanted}]},
        )
        topics = fetched.groups[0].topics if fetch_version >= 8 else fetched.topics
        offsets = [(p.committed_offset, p.metadata) for p in topics[0].partitions]
        assert offsets == [(42, "m"), (-1, "")]

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_for_unknown_group_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        wanted = [{"name": "t", "topic_id": TOPIC_ID, "partition_indexes": [1]}]
        body = {"group_id": "nobody", "topics": wanted}
        fetched = await call(node, ApiKey.OFFSET_FETCH, version, {**body, "groups": [body]})
        group = fetched.groups[0] if version >= 8 else fetched
        assert group.topics[0].partitions[0].committed_offset == -1
        assert group.topics[0].partitions[0].error_code == ErrorCode.none
        if version >= 2:
            assert group.error_code == ErrorCode.none

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
def test_describe_list_and_delete_groups_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        joined = await join(node, 5)
        described = await call(node, ApiKey.DESCRIBE_GROUPS, version, {"groups": ["g", "ghost"]})
        known, ghost = described.groups
        assert (known.error_code, known.group_state) == (ErrorCode.none, "CompletingRebalance")
        assert [m.member_id for m in known.members] == [joined.member_id]
        expected = ErrorCode.group_id_not_found if version >= 6 else ErrorCode.none
        assert (ghost.error_code, ghost.group_state) == (expected, "Dead")
        for list_version in versions(ApiKey.LIST_GROUPS):
            listed = await call(node, ApiKey.LIST_GROUPS, list_version, {})
            assert [group.group_id for group in listed.groups] == ["g"]
        delete_version = min(version, versions(ApiKey.DELETE_GROUPS)[-1])
        deleted = await call(node, ApiKey.DELETE_GROUPS, delete_version, {"groups_names": ["g"]})
        assert deleted.results[0].error_code == ErrorCode.non_empty_group

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        found = await call(
            node, ApiKey.FIND_COORDINATOR, version, {"key": "g", "coordinator_keys": ["g", "h"]}
        )
        answers = found.coordinators if version >= 4 else [found]
        assert {(a.node_id, a.host, a.port, a.error_code) for a in answers} == {
            (1, "broker.example", 9092, ErrorCode.none)
        }

    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.CONSUMER_GROUP_HEARTBEAT))
def test_consumer_group_heartbeat_and_describe_every_version(version: int) -> None:
    async def scenario(node: FakeNode) -> None:
        beat = await call(
            node,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            version,
            {
                "group_id": "k",
                "member_id": "" if version == 0 else "member-1",
                "member_epoch": 0,
                "rebalance_timeout": 30_000,
                "subscribed_topic_names": ["t"],
                "topic_partitions": [],
            },
        )
        assert (beat.error_code, beat.member_epoch) == (ErrorCode.none, 1)
        assert beat.assignment.topic_partitions[0].topic_id == TOPIC_ID
        assert list(beat.assignment.topic_partitions[0].partitions) == [0, 1]
        described = await call(node, ApiKey.CONSUMER_GROUP_DESCRIBE, version, {"group_ids": ["k"]})
        group = described.groups[0]
        assert (group.error_code, group.group_state, group.group_epoch) == (
            ErrorCode.none,
            "Stable",
            1,
        )
        assert group.members[0].assignment.topic_partitions[0].topic_name == "t"

    run(scenario)


def test_offset_delete() -> None:
    async def scenario(node: FakeNode) -> None:
        partition = {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}
        await call(
            node,
            ApiKey.OFFSET_COMMIT,
            9,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": "t", "partitions": [partition]}],
            },
        )
        body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
        deleted = await call(node, ApiKey.OFFSET_DELETE, 0, body)
        assert deleted.error_code == ErrorCode.none
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
        missing = await call(node, ApiKey.OFFSET_DELETE, 0, {**body, "group_id": "ghost"})
        assert missing.error_code == ErrorCode.group_id_not_found

    run(scenario)
