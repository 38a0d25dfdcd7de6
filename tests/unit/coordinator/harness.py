"""A group coordinator driven by a manual clock, with helpers that speak for test members."""

from __future__ import annotations

import struct
from typing import Any

from moldau.clock import ManualClock
from moldau.coordinator.classic import JoinGroupRequest
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.coordinator import GroupCoordinator
from moldau.coordinator.records import decode_record, encode_record
from moldau.coordinator.result import CoordinatorResult


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 naming `topics`."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class Parked:
    """Collects the response of a parked request."""

    def __init__(self) -> None:
        self.responses: list[dict[str, Any]] = []

    def __call__(self, response: dict[str, Any]) -> None:
        self.responses.append(response)

    @property
    def response(self) -> dict[str, Any]:
        assert len(self.responses) == 1, self.responses
        return self.responses[0]

    @property
    def done(self) -> bool:
        return bool(self.responses)


class Harness:
    def __init__(self, **overrides: Any) -> None:
        settings = {"group_initial_rebalance_delay_ms": 0, **overrides}
        self.config = GroupCoordinatorConfig(**settings)
        self.clock = ManualClock()
        self.coordinator = GroupCoordinator(self.config, self.clock)
        self.coordinator.finish_loading()
        self.log: list[tuple[bytes, bytes | None]] = []

    def run(self, result: CoordinatorResult) -> CoordinatorResult:
        """What the runtime does: append the records, then deliver the parked responses."""
        self.log.extend(encode_record(record) for record in result.records)
        for respond, response in result.deliveries:
            respond(response)
        return result

    def advance(self, ms: int) -> CoordinatorResult:
        self.clock.advance(ms)
        return self.run(self.coordinator.tick())

    def jump_wall(self, ms: int) -> CoordinatorResult:
        """The wall clock steps (NTP, an operator); monotonic time does not move."""
        self.clock.jump_wall(ms)
        return self.run(self.coordinator.tick())

    def reload(self) -> GroupCoordinator:
        """A fresh coordinator that loaded this one's log (as after a restart)."""
        fresh = GroupCoordinator(self.config, self.clock)
        for key, value in self.log:
            record = decode_record(key, value)
            assert record is not None
            fresh.replay(record)
        fresh.finish_loading()
        self.coordinator = fresh
        return fresh

    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        topics: tuple[str, ...] = ("t",),
        protocols: list[tuple[str, bytes]] | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        require_known_member_id: bool = True,
    ) -> Parked:
        parked = Parked()
        request = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocols=protocols or [("range", subscription(*topics))],
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id="client",
            client_host="/127.0.0.1",
            require_known_member_id=require_known_member_id,
        )
        result = self.run(self.coordinator.join_group(request, parked))
        if result.response is not None:
            parked(result.response)
        return parked

    def join_with_id(self, group_id: str, **kwargs: Any) -> Parked:
        """The KIP-394 dance: first join gets MEMBER_ID_REQUIRED, the second parks."""
        first = self.join(group_id, **kwargs)
        if kwargs.get("instance_id") is not None:
            return first
        assert first.response["error_code"].name == "member_id_required"
        return self.join(group_id, first.response["member_id"], **kwargs)

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
    ) -> Parked:
        parked = Parked()
        result = self.run(
            self.coordinator.sync_group(
                group_id=group_id,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
                protocol_type="consumer",
                protocol_name=None,
                assignments=assignments or {},
                respond=parked,
            )
        )
        if result.response is not None:
            parked(result.response)
        return parked

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> Any:
        result = self.run(
            self.coordinator.heartbeat(
                group_id=group_id,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=None,
            )
        )
        assert result.response is not None
        return result.response["error_code"]
