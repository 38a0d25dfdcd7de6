"""Consumer groups spoken directly on the wire: refusals with Kafka's codes, and a large group.

Requests are pipelined (the server answers each connection's requests in order), so a thousand
members park their JoinGroup at once over a few connections instead of a thousand sockets.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest

from moldau.protocol.adapter import decode_response, encode_request
from moldau.protocol.errors import ErrorCode

from .conftest import MoldauServer, ServerFactory
from .rdkafka import create_topic
from .wire import Connection, find_coordinator

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH = 11, 14, 12, 8, 9
SUBSCRIPTION = struct.pack(">hih1si", 0, 1, 1, b"t", -1)


class PipelinedConnection(Connection):
    """Send many requests, then read their responses in order."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        super().__init__(host, int(port), timeout=60)
        self._sent: list[tuple[int, int, int]] = []

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        correlation_id = next(self._correlation_ids)
        self._socket.sendall(encode_request(api_key, version, correlation_id, "wire", body))
        self._sent.append((api_key, version, correlation_id))

    def receive_all(self) -> list[Any]:
        responses = []
        for api_key, version, correlation_id in self._sent:
            (size,) = struct.unpack(">i", self._read(4))
            answered, response = decode_response(api_key, version, self._read(size))
            assert answered == correlation_id
            responses.append(response)
        self._sent.clear()
        return responses

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        return self.receive_all()[0]

    def close(self) -> None:
        self._socket.close()


@pytest.fixture(scope="module")
def wire_server(module_server_factory: ServerFactory) -> MoldauServer:
    server = module_server_factory(
        group_initial_rebalance_delay_ms="0", group_min_session_timeout_ms="1000"
    )
    with Connection(server.host, server.port) as connection:  # __consumer_offsets created
        assert find_coordinator(connection, "any").error_code == 0
    return server


def join_body(group_id: str, member_id: str = "") -> dict[str, Any]:
    return {
        "group_id": group_id,
        "session_timeout": 30_000,
        "rebalance_timeout": 60_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
    }


def sync_body(
    group_id: str, member_id: str, generation: int, assignments: dict[str, bytes]
) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
    }


def commit_body(group_id: str, generation: int, member_id: str, topic: str) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def join_alone(connection: PipelinedConnection, group_id: str) -> Any:
    first = connection.call(JOIN_GROUP, 5, join_body(group_id))
    assert first.error_code == ErrorCode.member_id_required
    return connection.call(JOIN_GROUP, 5, join_body(group_id, first.member_id))


def test_commits_from_unknown_members_and_old_generations_are_refused(
    wire_server: MoldauServer,
) -> None:
    topic, group_id = f"wire-{uuid.uuid4().hex[:8]}", f"wire-{uuid.uuid4().hex[:8]}"
    create_topic(wire_server.bootstrap_servers, topic, partitions=1)
    connection = PipelinedConnection(wire_server.bootstrap_servers)
    try:
        joined = join_alone(connection, group_id)
        member_id, generation = joined.member_id, joined.generation_id
        synced = connection.call(
            SYNC_GROUP, 3, sync_body(group_id, member_id, generation, {member_id: b"x"})
        )
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"x")

        def commit_error(generation_id: int, member: str) -> Any:
            response = connection.call(
                OFFSET_COMMIT, 7, commit_body(group_id, generation_id, member, topic)
            )
            return response.topics[0].partitions[0].error_code

        assert commit_error(generation, "stranger") == ErrorCode.unknown_member_id
        assert commit_error(generation - 1, member_id) == ErrorCode.illegal_generation
        assert commit_error(generation, member_id) == ErrorCode.none
        heartbeat = connection.call(
            HEARTBEAT,
            3,
            {
                "group_id": group_id,
                "generation_id": generation + 5,
                "member_id": member_id,
                "group_instance_id": None,
            },
        )
        assert heartbeat.error_code == ErrorCode.illegal_generation
        fetched = connection.call(
            OFFSET_FETCH,
            7,
            {
                "group_id": group_id,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "require_stable": False,
            },
        )
        assert fetched.topics[0].partitions[0].committed_offset == 1
    finally:
        connection.close()


def test_a_thousand_members_complete_a_rebalance(wire_server: MoldauServer) -> None:
    group_id = f"large-{uuid.uuid4().hex[:8]}"
    # 50 members per connection keeps each below the server's in-flight limit per connection.
    connections = [PipelinedConnection(wire_server.bootstrap_servers) for _ in range(20)]
    started = time.monotonic()
    try:
        for connection in connections:
            for _ in range(50):
                connection.send(JOIN_GROUP, 5, join_body(group_id))
        first = [response for c in connections for response in c.receive_all()]
        assert {response.error_code for response in first} == {ErrorCode.member_id_required}
        for index, response in enumerate(first):
            connections[index // 50].send(JOIN_GROUP, 5, join_body(group_id, response.member_id))
        joined = [response for c in connections for response in c.receive_all()]
        assert {response.error_code for response in joined} == {ErrorCode.none}
        generation = joined[0].generation_id
        leaders = [response for response in joined if response.members]
        assert len(leaders) == 1 and len(leaders[0].members) == 1000
        leader_id = leaders[0].member_id
        assignments = {response.member_id: response.member_id.encode() for response in joined}
        for index, response in enumerate(joined):
            member_id = response.member_id
            given = assignments if member_id == leader_id else {}
            body = sync_body(group_id, member_id, generation, given)
            connections[index // 50].send(SYNC_GROUP, 3, body)
        synced = [response for c in connections for response in c.receive_all()]
        assert {response.error_code for response in synced} == {ErrorCode.none}
        assert sorted(response.assignment for response in synced) == sorted(assignments.values())
    finally:
        for connection in connections:
            connection.close()
    assert time.monotonic() - started < 30
