"""Which registry instance writes: a Kafka consumer group, as Confluent's registry elects its
primary. Every instance joins group `schema-registry` with protocol type "sr" and its URL as
member metadata; the group's leader picks the instance with the smallest (scheme, host, port)
and SyncGroup tells every member who it is. A member that stops heartbeating (a dead node) is
dropped by the coordinator after the session timeout and the rest elect again; a node that
stops cleanly leaves the group at once.

Member metadata and assignment are JSON, as Confluent writes them:
    metadata   {"version":1,"host":H,"port":P,"scheme":"http","master_eligibility":true}
    assignment {"version":1,"error":0,"master":MEMBER_ID,"master_identity":{...metadata...}}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig
from moldau.client.errors import ErrorCode, KafkaException, error_code_of
from moldau.client.group import COORDINATOR_ERRORS
from moldau.client.tasks import stop_task
from moldau.protocol.api_keys import ApiKey

__all__ = ["GROUP_ID", "WriterElection"]

log = logging.getLogger(__name__)

GROUP_ID = "schema-registry"  # Confluent's `schema.registry.group.id` default
PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
SESSION_TIMEOUT_MS = 6000  # the broker's smallest allowed (group.min.session.timeout.ms)
REBALANCE_TIMEOUT_MS = 10000
HEARTBEAT_INTERVAL_S = 1.0
_RETRY_S = 0.5


class WriterElection:
    """This instance's membership; `writer_url` is the elected writer's URL (None while
    electing), `is_writer` whether it is this instance."""

    def __init__(self, client_config: Mapping[str, Any], *, url: str) -> None:
        self.cluster = Cluster(ClientConfig(dict(client_config)))
        scheme, _, rest = url.partition("://")
        host, _, port = rest.rstrip("/").rpartition(":")
        self.identity = {
            "version": 1,
            "host": host,
            "port": int(port),
            "scheme": scheme,
            "master_eligibility": True,
        }
        self.url = url
        self.member_id = ""
        self.generation_id = -1
        self.writer_url: str | None = None
        self.is_writer = False
        self.elected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="schema-registry-election")

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
        if self.member_id:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(3):
                    await self._request(
                        ApiKey.LEAVE_GROUP,
                        {
                            "group_id": GROUP_ID,
                            "member_id": self.member_id,
                            "members": [
                                {
                                    "member_id": self.member_id,
                                    "group_instance_id": None,
                                    "reason": None,
                                }
                            ],
                        },
                    )
        await self.cluster.close()

    def _unelected(self) -> None:
        self.writer_url = None
        self.is_writer = False
        self.elected.clear()

    async def _request(self, api_key: int, data: Mapping[str, Any], **kwargs: Any) -> Any:
        return await self.cluster.coordinator_request(
            GROUP_ID, api_key, data, errors=lambda r: [r.error_code], **kwargs
        )

    async def _run(self) -> None:
        while True:
            try:
                await self._join()
                await self._heartbeat()
            except (KafkaException, OSError) as error:
                log.debug("schema registry election: %s", error)
                if isinstance(error, KafkaException):
                    if error.code is ErrorCode.unknown_member_id:
                        self.member_id = ""
                    if error.code in COORDINATOR_ERRORS:
                        self.cluster.forget_coordinator(GROUP_ID)
                await asyncio.sleep(_RETRY_S)
            self._unelected()

    async def _join(self) -> None:
        timeout = (REBALANCE_TIMEOUT_MS + SESSION_TIMEOUT_MS) / 1000 + 5
        while True:
            response = await self._request(
                ApiKey.JOIN_GROUP,
                {
                    "group_id": GROUP_ID,
                    "session_timeout": SESSION_TIMEOUT_MS,
                    "rebalance_timeout": REBALANCE_TIMEOUT_MS,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": PROTOCOL_TYPE,
                    "protocols": [
                        {"name": PROTOCOL_NAME, "metadata": json.dumps(self.identity).encode()}
                    ],
                    "reason": None,
                },
                timeout=timeout,
            )
            error = error_code_of(response.error_code)
            self.member_id = response.member_id or self.member_id
            if error is ErrorCode.member_id_required:
                continue
            if error is not ErrorCode.none:
                raise KafkaException(error, f"JoinGroup {GROUP_ID}")
            break
        self.generation_id = int(response.generation_id)
        assignments: list[dict[str, Any]] = []
        if response.leader == self.member_id:
            assignments = self._assign(response.members)
        sync = await self._request(
            ApiKey.SYNC_GROUP,
            {
                "group_id": GROUP_ID,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": PROTOCOL_NAME,
                "assignments": assignments,
            },
            timeout=timeout,
        )
        error = error_code_of(sync.error_code)
        if error is not ErrorCode.none:
            raise KafkaException(error, f"SyncGroup {GROUP_ID}")
        assignment = json.loads(bytes(sync.assignment) or b"{}")
        identity = assignment.get("master_identity") or {}
        if assignment.get("error", 0) != 0 or not identity:
            raise KafkaException(ErrorCode.rebalance_in_progress, "no eligible writer")
        self.writer_url = f"{identity['scheme']}://{identity['host']}:{identity['port']}"
        self.is_writer = assignment.get("master") == self.member_id
        self.elected.set()
        log.info(
            "schema registry: the writer is %s%s",
            self.writer_url,
            " (this node)" if self.is_writer else "",
        )

    @staticmethod
    def _assign(members: Any) -> list[dict[str, Any]]:
        identities: dict[str, dict[str, Any]] = {}
        for member in members:
            with contextlib.suppress(ValueError, TypeError):
                identity = json.loads(bytes(member.metadata))
                if isinstance(identity, dict) and identity.get("master_eligibility", True):
                    identities[member.member_id] = identity
        chosen = min(
            identities,
            key=lambda m: (identities[m]["scheme"], identities[m]["host"], identities[m]["port"]),
            default=None,
        )
        assignment = {
            "version": 1,
            "error": 0 if chosen is not None else 1,
            "master": chosen,
            "master_identity": identities.get(chosen) if chosen is not None else None,
        }
        encoded = json.dumps(assignment).encode()
        return [{"member_id": member.member_id, "assignment": encoded} for member in members]

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            response = await self._request(
                ApiKey.HEARTBEAT,
                {
                    "group_id": GROUP_ID,
                    "generation_id": self.generation_id,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                },
            )
            error = error_code_of(response.error_code)
            if error is not ErrorCode.none:
                raise KafkaException(error, f"Heartbeat {GROUP_ID}")
