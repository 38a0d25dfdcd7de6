"""The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`), created when
first needed, as Kafka creates them: the first FindCoordinator for a group (a transactional id)
asks for its topic, and is answered COORDINATOR_NOT_AVAILABLE until the topic's partitions have
leaders; clients retry that answer. A cluster that never sees a group or a transaction holds
neither topic's partitions.

The replication factor is the configured one (`offsets.topic.replication.factor`,
`transaction.state.log.replication.factor`) capped to the active brokers there are
(`placement.internal_topic_replication`). In a cluster, a creation first waits up to
`BROKERS_WAIT_S` for as many active brokers as configured, so that a cluster started all at once
and asked at once does not place the topic on whichever broker registered first.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.controller.operations import NewTopic
from moldau.controller.placement import internal_topic_replication
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

__all__ = ["BROKERS_WAIT_S", "InternalTopic", "InternalTopics"]

log = logging.getLogger(__name__)

BROKERS_WAIT_S = 5.0
CREATION_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class InternalTopic:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor_key: str = ""


class InternalTopics:
    """The internal topics a node's coordinators use, each created at most once at a time."""

    def __init__(self, node: BrokerServices) -> None:
        self._node = node
        self._topics: dict[str, InternalTopic] = {}
        self._creating: dict[str, asyncio.Task[None]] = {}

    def register(self, topic: InternalTopic) -> None:
        self._topics[topic.name] = topic

    def ready(self, name: str) -> bool:
        """True if `name` exists; else its creation is started (unless under way) and False."""
        if name in self._node.metadata_image.topics:
            return True
        topic = self._topics.get(name)
        task = self._creating.get(name)
        if topic is not None and (task is None or task.done()):
            self._creating[name] = asyncio.get_running_loop().create_task(
                self._create(topic), name=f"create {name}"
            )
        return False

    async def stop(self) -> None:
        for task in self._creating.values():
            task.cancel()
        await asyncio.gather(*self._creating.values(), return_exceptions=True)
        self._creating.clear()

    async def _create(self, topic: InternalTopic) -> None:
        try:
            await self.create(topic)
        except Exception as error:  # the next FindCoordinator asks again
            log.warning("creating %s failed: %s", topic.name, error)

    async def create(self, topic: InternalTopic) -> None:
        """Create `topic` unless it exists, and wait until this broker's logs of it exist."""
        node = self._node
        if topic.name in node.metadata_image.topics:
            return
        configured = int(node.config.get(topic.replication_factor_key))
        if not node.layout.standalone:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + BROKERS_WAIT_S
            while (
                len(node.metadata_image.active_brokers()) < configured
                and topic.name not in node.metadata_image.topics
                and loop.time() < deadline
            ):
                await asyncio.sleep(0.05)
            if topic.name in node.metadata_image.topics:
                return
        replication_factor, replication_configs = internal_topic_replication(
            configured, len(node.metadata_image.active_brokers())
        )
        new = NewTopic(
            name=topic.name,
            num_partitions=topic.partitions,
            replication_factor=replication_factor,
            configs={**replication_configs, **topic.configs},
        )
        [result] = await node.create_topics_via_controller([new])
        if result.error_code == ErrorCode.none:
            log.info("created %s: %d partitions, replication factor %d",
                     topic.name, topic.partitions, replication_factor)  # fmt: skip
        elif result.error_code != ErrorCode.topic_already_exists:
            raise RuntimeError(f"cannot create {topic.name}: {result.error_message}")
        if not await node.wait_for_partitions([topic.name], timeout_s=CREATION_TIMEOUT_S):
            raise RuntimeError(
                f"the logs of {topic.name} were not created within {CREATION_TIMEOUT_S:.0f} s"
            )
