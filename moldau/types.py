"""Identifiers shared by every layer: topic names, partition keys, broker and producer ids."""

from __future__ import annotations

from typing import NamedTuple, NewType

TopicName = NewType("TopicName", str)
GroupId = NewType("GroupId", str)
TransactionalId = NewType("TransactionalId", str)
BrokerId = NewType("BrokerId", int)
ProducerId = NewType("ProducerId", int)


class TopicPartition(NamedTuple):
    """A partition of a topic, the unit of storage, leadership and assignment."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_LEADER = -1
NO_LEADER_EPOCH = -1
