"""`ClusterConsole`: the console's one connection to the cluster, behind the routes.

It owns one `AdminClient` for the console's lifetime, a `Producer` made on the first test
message, and the lag history; a browse gets a consumer of its own. The user's client settings
(`-X`, `--command-config`: TLS, SASL, timeouts) apply to all of them, except what the console
decides itself: no `group.id`, `group.instance.id` or `transactional.id` (it joins no group and
writes no transaction), a test message acknowledged by all in-sync replicas within 15 s, and a
browse reading committed records without committing anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from moldau.client.admin import AdminClient, GroupListing
from moldau.client.producer import Producer
from moldau.console import actions, records, views
from moldau.console.lag import LagHistory
from moldau.console.model import (
    BrowseRequest,
    BrowseResult,
    GroupDetail,
    Overview,
    Produced,
    ProduceRequest,
    ResetRequest,
    TopicDetail,
    TopicsView,
)
from moldau.types import TopicPartition

__all__ = ["ClusterConsole"]

_NOT_FOR_THE_CONSOLE: Final = ("group.id", "group.instance.id", "transactional.id")
# A test message that cannot be delivered fails within 15 s, not the client's default 5 minutes.
_PRODUCER_SETTINGS: Final = {"acks": "all", "linger.ms": 0, "message.timeout.ms": 15_000}
_CONSUMER_SETTINGS: Final = {
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 100,
    "isolation.level": "read_committed",
}


class ClusterConsole:
    """What the routes ask of the cluster (`app.ConsoleBackend`); an async context manager."""

    def __init__(
        self, settings: Mapping[str, Any], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = {
            "client.id": "moldau-console",
            **{k: v for k, v in settings.items() if k not in _NOT_FOR_THE_CONSOLE},
        }
        self.admin = AdminClient(self.settings)
        self.history = LagHistory(clock=clock)
        self._producer: Producer | None = None

    async def __aenter__(self) -> ClusterConsole:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()
            self._producer = None
        await self.admin.close()

    async def overview(self) -> Overview:
        return await views.overview(self.admin)

    async def topics(self) -> TopicsView:
        return await views.topics(self.admin)

    async def topic(self, name: str) -> TopicDetail:
        return await views.topic_detail(self.admin, name)

    async def create_topic(
        self,
        *,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> None:
        await actions.create_topic(
            self.admin,
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            configs=configs,
        )

    async def set_topic_config(self, topic: str, name: str, value: str) -> None:
        await actions.set_topic_config(self.admin, topic, name, value)

    async def browse(self, request: BrowseRequest) -> BrowseResult:
        consumer_settings = {**self.settings, **_CONSUMER_SETTINGS}
        return await records.browse(self.admin, consumer_settings, request)

    async def produce(self, request: ProduceRequest) -> Produced:
        if self._producer is None:
            self._producer = Producer({**self.settings, **_PRODUCER_SETTINGS})
        return await records.produce(self.admin, self._producer, request)

    async def groups(self) -> list[GroupListing]:
        return await views.list_groups(self.admin)

    async def group(self, group_id: str) -> GroupDetail:
        return await views.group_detail(self.admin, group_id, self.history)

    async def reset_offsets(self, request: ResetRequest) -> dict[TopicPartition, int]:
        return await actions.reset_offsets(self.admin, request)
